//! `flatbuffers`: FlatBuffers, from the flatbuffers crate and code flatc generated from
//! `messages.fbs` (`generate.sh`). A builder reused message after message (built back to
//! front, then copied out); a receiver verifies the buffer, reads it where it lies and copies
//! every field out into the owned type. The fixed records are FlatBuffers structs, stored
//! inline; each message is a table.

use super::types::{
    Array, Fields, Nml, Point, PointCloud, Sequence, Struct16, Struct256, Struct4k, Text,
};
use super::{Codec, CodecError, Format};
use flatbuffers::{FlatBufferBuilder, Follow, UnionWIPOffset, Verifiable, WIPOffset};

// Generated code reads little-endian fields from byte arrays through raw pointers.
#[allow(unsafe_code, clippy::all, unused_imports, dead_code, non_camel_case_types)]
#[rustfmt::skip]
mod messages_generated;
use messages_generated::fb;

pub const FORMAT: Format = Format {
    name: "flatbuffers",
    about: "FlatBuffers (flatbuffers): tables with vtables, structs inline, verified then read in place",
    codec: |values| super::types::for_each_type!(values, v: T => Box::new(FlatbuffersCodec::<T> { values: v, builder: FlatBufferBuilder::new() })),
};

/// A type's table in the schema, and how a value goes in and comes out.
trait Table: Fields + Sized {
    type Fb<'a>: Follow<'a, Inner = Self::Fb<'a>> + Verifiable + 'a;
    fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset>;
    fn read(t: Self::Fb<'_>) -> Self;
}

struct FlatbuffersCodec<T> {
    values: Vec<T>,
    builder: FlatBufferBuilder<'static>,
}

impl<T: Table + Send> Codec for FlatbuffersCodec<T> {
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        self.builder.reset();
        let root = self.values[index].build(&mut self.builder);
        self.builder.finish(root, None);
        let data = self.builder.finished_data();
        let room = out.len();
        out.get_mut(..data.len())
            .ok_or(CodecError::NoRoom { room })?
            .copy_from_slice(data);
        Ok(data.len())
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        flatbuffers::root::<T::Fb<'_>>(body)
            .map(|t| T::read(t).checksum())
            .map_err(CodecError::format)
    }
}

/// A record of scalar fields as a FlatBuffers struct: made from its fields in order, read by
/// their names.
macro_rules! record {
    ($T:ident, $fb:ident { $($field:ident),* }) => {
        impl From<&$T> for fb::$fb {
            fn from(s: &$T) -> Self {
                fb::$fb::new($(s.$field),*)
            }
        }
        impl From<&fb::$fb> for $T {
            fn from(f: &fb::$fb) -> Self {
                $T { $($field: f.$field(),)* }
            }
        }
    };
}

record!(Struct16, Struct16 { id, count, value });
record!(Point, Point { x, y, z, intensity });
#[rustfmt::skip] // one row of fields, not one a line
record!(Struct256, Struct256 {
    id, stamp_ns, x, y, z, qx, qy, qz, qw, vx, vy, vz, wx, wy, wz, cov_x, cov_y, cov_z,
    cov_roll, cov_pitch, cov_yaw, cov_vx, cov_vy, cov_vz, cov_wx, cov_wy, status, mode, source,
    target, frame, quality, retries, faults, gain_p, gain_i, gain_d, gain_ff
});

/// A vector's elements, copied out (empty where the field is absent).
fn list<'a, T: Follow<'a> + 'a>(v: Option<flatbuffers::Vector<'a, T>>) -> Vec<T::Inner> {
    v.map(|v| v.iter().collect()).unwrap_or_default()
}

impl Table for Array {
    type Fb<'a> = fb::Array<'a>;
    fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset> {
        let values = Some(b.create_vector(&self.values));
        fb::Array::create(b, &fb::ArrayArgs { values }).as_union_value()
    }
    fn read(t: fb::Array<'_>) -> Self {
        Array {
            values: list(t.values()),
        }
    }
}

/// A record sent alone: a table holding it as its one field.
macro_rules! record_table {
    ($T:ident in $table:ident) => {
        impl Table for $T {
            type Fb<'a> = fb::$table<'a>;
            fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset> {
                let value = fb::$T::from(self);
                pastey::paste! {
                    fb::$table::create(b, &fb::[<$table Args>] { value: Some(&value) })
                        .as_union_value()
                }
            }
            fn read(t: fb::$table<'_>) -> Self {
                t.value().map($T::from).unwrap_or_default()
            }
        }
    };
}

record_table!(Struct16 in Record16);
record_table!(Struct256 in Record256);

impl Table for Struct4k {
    type Fb<'a> = fb::Struct4k<'a>;
    fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset> {
        let head = self.head.as_ref().map(fb::Struct256::from);
        let samples = Some(b.create_vector(&self.samples));
        fb::Struct4k::create(
            b,
            &fb::Struct4kArgs {
                head: head.as_ref(),
                samples,
            },
        )
        .as_union_value()
    }
    fn read(t: fb::Struct4k<'_>) -> Self {
        Struct4k {
            head: t.head().map(Struct256::from),
            samples: list(t.samples()),
        }
    }
}

impl Table for Sequence {
    type Fb<'a> = fb::Sequence<'a>;
    fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset> {
        let items = Some(b.create_vector_from_iter(self.items.iter().map(fb::Struct16::from)));
        fb::Sequence::create(b, &fb::SequenceArgs { items }).as_union_value()
    }
    fn read(t: fb::Sequence<'_>) -> Self {
        Sequence {
            items: t
                .items()
                .map(|v| v.iter().map(Struct16::from).collect())
                .unwrap_or_default(),
        }
    }
}

impl Table for Text {
    type Fb<'a> = fb::TextMsg<'a>;
    fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset> {
        let text = Some(b.create_string(&self.text));
        fb::TextMsg::create(b, &fb::TextMsgArgs { text }).as_union_value()
    }
    fn read(t: fb::TextMsg<'_>) -> Self {
        Text {
            text: t.text().unwrap_or_default().to_string(),
        }
    }
}

impl Table for PointCloud {
    type Fb<'a> = fb::PointCloud<'a>;
    fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset> {
        let frame = Some(b.create_string(&self.frame));
        let points = Some(b.create_vector_from_iter(self.points.iter().map(fb::Point::from)));
        fb::PointCloud::create(
            b,
            &fb::PointCloudArgs {
                stamp_ns: self.stamp_ns,
                frame,
                points,
            },
        )
        .as_union_value()
    }
    fn read(t: fb::PointCloud<'_>) -> Self {
        PointCloud {
            stamp_ns: t.stamp_ns(),
            frame: t.frame().unwrap_or_default().to_string(),
            points: t
                .points()
                .map(|v| v.iter().map(Point::from).collect())
                .unwrap_or_default(),
        }
    }
}

impl Table for Nml {
    type Fb<'a> = fb::Nml<'a>;
    fn build(&self, b: &mut FlatBufferBuilder<'_>) -> WIPOffset<UnionWIPOffset> {
        let args = fb::NmlArgs {
            chars: Some(b.create_vector(&self.chars)),
            ints: Some(b.create_vector(&self.ints)),
            uints: Some(b.create_vector(&self.uints)),
            longs: Some(b.create_vector(&self.longs)),
            ulongs: Some(b.create_vector(&self.ulongs)),
            floats: Some(b.create_vector(&self.floats)),
            doubles: Some(b.create_vector(&self.doubles)),
            bools: Some(b.create_vector(&self.bools)),
        };
        fb::Nml::create(b, &args).as_union_value()
    }
    fn read(t: fb::Nml<'_>) -> Self {
        Nml {
            chars: list(t.chars()),
            ints: list(t.ints()),
            uints: list(t.uints()),
            longs: list(t.longs()),
            ulongs: list(t.ulongs()),
            floats: list(t.floats()),
            doubles: list(t.doubles()),
            bools: list(t.bools()),
        }
    }
}
