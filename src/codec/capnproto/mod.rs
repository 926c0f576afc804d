//! `capnp`: Cap'n Proto, from the capnp crate and code its compiler generated from
//! `messages.capnp` (`generate.sh`). Encoded into a scratch segment sized once for the largest
//! value (no allocation per message), written with its segment table; a receiver reads the
//! message where it lies and copies every field out into the owned type.

use super::types::{
    Array, Fields, Nml, Point, PointCloud, Sequence, Struct16, Struct256, Struct4k, Text,
};
use super::{Codec, CodecError, Format};
use capnp::message::{Builder, ReaderOptions, ScratchSpaceHeapAllocator};
use capnp::traits::Owned;

#[allow(clippy::all, unused_qualifications)]
#[rustfmt::skip]
mod messages_capnp;
use messages_capnp as m;

pub const FORMAT: Format = Format {
    name: "capnp",
    about: "Cap'n Proto (capnp): words laid out as in memory, pointers, read in place",
    codec: |values| super::types::for_each_type!(values, v: T => Box::new(CapnpCodec::<T>::new(v))),
};

/// A type's struct in the schema, and how a value goes in and comes out.
trait Schema: Fields + Sized {
    type Owned: Owned;
    fn build(&self, b: <Self::Owned as Owned>::Builder<'_>) -> capnp::Result<()>;
    fn read(r: <Self::Owned as Owned>::Reader<'_>) -> capnp::Result<Self>;
}

struct CapnpCodec<T> {
    values: Vec<T>,
    /// The first segment of every message: words, so 8-aligned as capnp needs.
    scratch: Vec<u64>,
    /// A body at an address that is not 8-aligned is copied here first (capnp reads words).
    aligned: Vec<u64>,
}

impl<T: Schema> CapnpCodec<T> {
    fn new(values: Vec<T>) -> Self {
        // Sized by the largest value encoded once on the heap; a larger one would take a
        // second segment, still correct.
        let words = values
            .iter()
            .map(|v| {
                let mut msg = Builder::new_default();
                v.build(msg.init_root())
                    .map(|_| capnp::serialize::compute_serialized_size_in_words(&msg))
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        CapnpCodec {
            values,
            scratch: vec![0; words + 1],
            aligned: Vec::new(),
        }
    }
}

impl<T: Schema + Send> Codec for CapnpCodec<T> {
    fn encode(&mut self, index: usize, out: &mut [u8]) -> Result<usize, CodecError> {
        let scratch: &mut [u8] = bytemuck::cast_slice_mut(&mut self.scratch);
        let mut msg = Builder::new(ScratchSpaceHeapAllocator::new(scratch));
        self.values[index]
            .build(msg.init_root())
            .map_err(CodecError::format)?;
        let room = out.len();
        let mut rest = &mut out[..];
        capnp::serialize::write_message(&mut rest, &msg).map_err(|e| match e.kind {
            // Writing into a full slice is its only io error.
            capnp::ErrorKind::Failed | capnp::ErrorKind::BufferNotLargeEnough => {
                CodecError::NoRoom { room }
            }
            _ => CodecError::format(e),
        })?;
        Ok(room - rest.len())
    }
    fn decode(&mut self, body: &[u8]) -> Result<u64, CodecError> {
        let body = if (body.as_ptr() as usize).is_multiple_of(8) {
            body
        } else {
            self.aligned.clear();
            self.aligned.resize(body.len().div_ceil(8), 0);
            let words: &mut [u8] = bytemuck::cast_slice_mut(&mut self.aligned);
            words[..body.len()].copy_from_slice(body);
            &words[..body.len()]
        };
        decoded::<T>(body).map_err(CodecError::format)
    }
}

/// The checksum of a body's value, copied out of the message into the owned type.
fn decoded<T: Schema>(mut body: &[u8]) -> capnp::Result<u64> {
    let msg =
        capnp::serialize::read_message_from_flat_slice_no_alloc(&mut body, ReaderOptions::new())?;
    let value = T::read(msg.get_root()?)?;
    Ok(value.checksum())
}

/// A record of scalar fields: each set and got by its name.
macro_rules! record {
    ($T:ident, $module:ident { $($field:ident),* }) => {
        impl Schema for $T {
            type Owned = m::$module::Owned;
            fn build(&self, mut b: m::$module::Builder<'_>) -> capnp::Result<()> {
                pastey::paste! { $(b.[<set_ $field>](self.$field);)* }
                Ok(())
            }
            fn read(r: m::$module::Reader<'_>) -> capnp::Result<Self> {
                Ok(pastey::paste! { $T { $($field: r.[<get_ $field>](),)* } })
            }
        }
    };
}

record!(Struct16, struct16 { id, count, value });
record!(Point, point { x, y, z, intensity });
#[rustfmt::skip] // one row of fields, not one a line
record!(Struct256, struct256 {
    id, stamp_ns, x, y, z, qx, qy, qz, qw, vx, vy, vz, wx, wy, wz, cov_x, cov_y, cov_z,
    cov_roll, cov_pitch, cov_yaw, cov_vx, cov_vy, cov_vz, cov_wx, cov_wy, status, mode, source,
    target, frame, quality, retries, faults, gain_p, gain_i, gain_d, gain_ff
});

/// Fills a list of scalars from a slice: one copy where the list lies as the slice does
/// (little-endian, aligned: any scalar but a bool, which is a bit), else element by element
/// (what the crate's own setter from a slice does for every type). A macro, as the crate
/// names the element trait only in its private module.
macro_rules! fill {
    ($builder:expr, $field:ident, $from:expr) => {{
        let from = &$from;
        let mut list = pastey::paste! { $builder.[<init_ $field>](from.len() as u32) };
        match list.as_slice() {
            Some(to) => to.copy_from_slice(from),
            None => {
                for (i, v) in from.iter().enumerate() {
                    list.set(i as u32, *v);
                }
            }
        }
    }};
}

/// A list of scalars copied out: in one copy where it lies as a slice would.
macro_rules! copied {
    ($list:expr) => {{
        let list = $list;
        list.as_slice()
            .map_or_else(|| list.iter().collect(), <[_]>::to_vec)
    }};
}

/// Lists of scalars, each filled and copied out by `fill!` and `copied!`.
macro_rules! scalar_lists {
    ($T:ident, $module:ident { $($field:ident),* }) => {
        impl Schema for $T {
            type Owned = m::$module::Owned;
            fn build(&self, mut b: m::$module::Builder<'_>) -> capnp::Result<()> {
                $(fill!(b.reborrow(), $field, self.$field);)*
                Ok(())
            }
            fn read(r: m::$module::Reader<'_>) -> capnp::Result<Self> {
                Ok(pastey::paste! { $T { $($field: copied!(r.[<get_ $field>]()?),)* } })
            }
        }
    };
}

scalar_lists!(Array, array { values });

impl Schema for Nml {
    type Owned = m::nml::Owned;
    fn build(&self, mut b: m::nml::Builder<'_>) -> capnp::Result<()> {
        b.set_chars(&self.chars[..]);
        fill!(b.reborrow(), ints, self.ints);
        fill!(b.reborrow(), uints, self.uints);
        fill!(b.reborrow(), longs, self.longs);
        fill!(b.reborrow(), ulongs, self.ulongs);
        fill!(b.reborrow(), floats, self.floats);
        fill!(b.reborrow(), doubles, self.doubles);
        fill!(b, bools, self.bools);
        Ok(())
    }
    fn read(r: m::nml::Reader<'_>) -> capnp::Result<Self> {
        Ok(Nml {
            chars: r.get_chars()?.to_vec(),
            ints: copied!(r.get_ints()?),
            uints: copied!(r.get_uints()?),
            longs: copied!(r.get_longs()?),
            ulongs: copied!(r.get_ulongs()?),
            floats: copied!(r.get_floats()?),
            doubles: copied!(r.get_doubles()?),
            bools: copied!(r.get_bools()?),
        })
    }
}

impl Schema for Struct4k {
    type Owned = m::struct4k::Owned;
    fn build(&self, mut b: m::struct4k::Builder<'_>) -> capnp::Result<()> {
        if let Some(head) = &self.head {
            head.build(b.reborrow().init_head())?;
        }
        fill!(b, samples, self.samples);
        Ok(())
    }
    fn read(r: m::struct4k::Reader<'_>) -> capnp::Result<Self> {
        Ok(Struct4k {
            head: match r.has_head() {
                true => Some(Struct256::read(r.get_head()?)?),
                false => None,
            },
            samples: copied!(r.get_samples()?),
        })
    }
}

impl Schema for Sequence {
    type Owned = m::sequence::Owned;
    fn build(&self, b: m::sequence::Builder<'_>) -> capnp::Result<()> {
        let mut items = b.init_items(self.items.len() as u32);
        for (i, item) in self.items.iter().enumerate() {
            item.build(items.reborrow().get(i as u32))?;
        }
        Ok(())
    }
    fn read(r: m::sequence::Reader<'_>) -> capnp::Result<Self> {
        Ok(Sequence {
            items: r
                .get_items()?
                .iter()
                .map(Struct16::read)
                .collect::<capnp::Result<_>>()?,
        })
    }
}

impl Schema for Text {
    type Owned = m::text_msg::Owned;
    fn build(&self, mut b: m::text_msg::Builder<'_>) -> capnp::Result<()> {
        b.set_text(&self.text);
        Ok(())
    }
    fn read(r: m::text_msg::Reader<'_>) -> capnp::Result<Self> {
        Ok(Text {
            text: r.get_text()?.to_str()?.to_string(),
        })
    }
}

impl Schema for PointCloud {
    type Owned = m::point_cloud::Owned;
    fn build(&self, mut b: m::point_cloud::Builder<'_>) -> capnp::Result<()> {
        b.set_stamp_ns(self.stamp_ns);
        b.set_frame(&self.frame);
        let mut points = b.init_points(self.points.len() as u32);
        for (i, p) in self.points.iter().enumerate() {
            p.build(points.reborrow().get(i as u32))?;
        }
        Ok(())
    }
    fn read(r: m::point_cloud::Reader<'_>) -> capnp::Result<Self> {
        Ok(PointCloud {
            stamp_ns: r.get_stamp_ns(),
            frame: r.get_frame()?.to_str()?.to_string(),
            points: r
                .get_points()?
                .iter()
                .map(Point::read)
                .collect::<capnp::Result<_>>()?,
        })
    }
}
