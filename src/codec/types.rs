//! The typed messages: each declared once, with the derives every format reads (serde for
//! postcard, json and cdr; prost's for protobuf; rkyv's; bytemuck's for the plain-old-data
//! ones the raw copy moves as they lie in memory), values made from a seed, and a checksum
//! of the fields that a receiver computes from what it decoded.

use rkyv::{Archive, Deserialize as RkyvDeserialize, Serialize as RkyvSerialize};
use serde::{Deserialize, Serialize};

/// A decoded value's fields folded into one number: equal for equal values whatever format
/// carried them, and changed by any field that differs.
pub trait Fields {
    fn checksum(&self) -> u64;
}

/// Folds fields into a checksum: each one's bits, mixed with its position, added. Any one
/// field changed changes the sum, two swapped almost surely do, and the fields of an array
/// add up independently, so the checksum costs about what reading them costs (every decode
/// reads its fields once, as the application that decoded them would).
fn fold_all(seed: u64, fields: impl IntoIterator<Item = u64>) -> u64 {
    fields.into_iter().enumerate().fold(seed, |acc, (i, v)| {
        acc.wrapping_add(v ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    })
}

/// Values from a seed (splitmix64): runs repeat, and every value differs.
pub struct Seeded(u64);

impl Seeded {
    pub fn new(seed: u64) -> Self {
        Seeded(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A finite float of ordinary magnitude, as sensors and positions give.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2000.0 - 1000.0
    }
    pub fn f32(&mut self) -> f32 {
        self.f64() as f32
    }
    /// A printable ASCII character.
    pub fn letter(&mut self) -> char {
        (b' ' + (self.next_u64() % 95) as u8) as char
    }
}

/// A field's bits, from the owned value or its rkyv archive alike.
pub trait Bits {
    fn bits(&self) -> u64;
}

macro_rules! bits {
    ($($T:ty => |$v:ident| $e:expr;)*) => {$(
        impl Bits for $T {
            #[inline(always)]
            fn bits(&self) -> u64 {
                let $v = *self;
                $e
            }
        }
    )*};
}

bits! {
    u8 => |v| v as u64;
    bool => |v| v as u64;
    u32 => |v| v as u64;
    i32 => |v| v as u32 as u64;
    u64 => |v| v;
    i64 => |v| v as u64;
    f32 => |v| v.to_bits() as u64;
    f64 => |v| v.to_bits();
    rkyv::rend::u32_le => |v| v.to_native() as u64;
    rkyv::rend::i32_le => |v| v.to_native() as u32 as u64;
    rkyv::rend::u64_le => |v| v.to_native();
    rkyv::rend::i64_le => |v| v.to_native() as u64;
    rkyv::rend::f32_le => |v| v.to_native().to_bits() as u64;
    rkyv::rend::f64_le => |v| v.to_native().to_bits();
}

/// [`Fields`] for a type and its rkyv archive, from one body: the archive's fields read as
/// the owned ones do (a `Vec` and an archived one both iterate, both strings give `as_str`).
macro_rules! fields {
    ($T:ident, $Archived:ident, |$s:ident| $body:expr) => {
        impl Fields for $T {
            fn checksum(&self) -> u64 {
                let $s = self;
                $body
            }
        }
        impl Fields for $Archived {
            fn checksum(&self) -> u64 {
                let $s = self;
                $body
            }
        }
    };
}

/// Declares a message type with the derives every format reads.
macro_rules! message {
    ($(#[$doc:meta])* pub struct $name:ident $fields:tt) => {
        $(#[$doc])*
        #[derive(
            Clone, PartialEq, prost::Message, Serialize, Deserialize, Archive, RkyvSerialize,
            RkyvDeserialize,
        )]
        pub struct $name $fields
    };
}

/// Declares a plain struct of named scalar fields (all the formats' derives, `repr(C)` with
/// no padding), how to fill it from a seed and its checksum.
macro_rules! scalars {
    ($(#[$doc:meta])* $name:ident / $archived:ident { $($field:ident: $ty:ident = $proto:ident, $tag:literal;)* }) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, PartialEq, prost::Message, Serialize, Deserialize, Archive,
            RkyvSerialize, RkyvDeserialize, bytemuck::Pod, bytemuck::Zeroable,
        )]
        #[repr(C)]
        pub struct $name {
            $(#[prost($proto, tag = $tag)] pub $field: $ty,)*
        }

        impl $name {
            fn seeded(r: &mut Seeded) -> Self {
                $name { $($field: scalars!(@value $ty, r),)* }
            }
        }

        fields!($name, $archived, |s| fold_all(0, [$(s.$field.bits()),*]));
    };
    (@value u64, $r:ident) => { $r.next_u64() };
    (@value u32, $r:ident) => { $r.next_u64() as u32 };
    (@value i32, $r:ident) => { $r.next_u64() as i32 };
    (@value f64, $r:ident) => { $r.f64() };
    (@value f32, $r:ident) => { $r.f32().abs() };
}

message! {
    /// `array:N`: N doubles.
    pub struct Array {
        #[prost(double, repeated, tag = "1")]
        pub values: Vec<f64>,
    }
}

fields!(Array, ArchivedArray, |s| fold_all(
    1,
    s.values.iter().map(Bits::bits)
));

scalars! {
    /// `struct16`: 16 bytes of fields, no padding.
    Struct16 / ArchivedStruct16 {
        id: u64 = uint64, "1";
        count: u32 = uint32, "2";
        value: f32 = float, "3";
    }
}

scalars! {
    /// `struct256`: a robot's state as one flat record, 256 bytes: ids and stamps, pose, twist
    /// and covariance diagonals in doubles, counters in integers, gains in floats.
    Struct256 / ArchivedStruct256 {
        id: u64 = uint64, "1";
        stamp_ns: u64 = uint64, "2";
        x: f64 = double, "3";
        y: f64 = double, "4";
        z: f64 = double, "5";
        qx: f64 = double, "6";
        qy: f64 = double, "7";
        qz: f64 = double, "8";
        qw: f64 = double, "9";
        vx: f64 = double, "10";
        vy: f64 = double, "11";
        vz: f64 = double, "12";
        wx: f64 = double, "13";
        wy: f64 = double, "14";
        wz: f64 = double, "15";
        cov_x: f64 = double, "16";
        cov_y: f64 = double, "17";
        cov_z: f64 = double, "18";
        cov_roll: f64 = double, "19";
        cov_pitch: f64 = double, "20";
        cov_yaw: f64 = double, "21";
        cov_vx: f64 = double, "22";
        cov_vy: f64 = double, "23";
        cov_vz: f64 = double, "24";
        cov_wx: f64 = double, "25";
        cov_wy: f64 = double, "26";
        status: u32 = uint32, "27";
        mode: u32 = uint32, "28";
        source: u32 = uint32, "29";
        target: u32 = uint32, "30";
        frame: i32 = int32, "31";
        quality: i32 = int32, "32";
        retries: u32 = uint32, "33";
        faults: u32 = uint32, "34";
        gain_p: f32 = float, "35";
        gain_i: f32 = float, "36";
        gain_d: f32 = float, "37";
        gain_ff: f32 = float, "38";
    }
}

message! {
    /// `struct4k`: a header record (`struct256`) and 480 samples, 4096 bytes of fields.
    pub struct Struct4k {
        #[prost(message, optional, tag = "1")]
        pub head: Option<Struct256>,
        #[prost(double, repeated, tag = "2")]
        pub samples: Vec<f64>,
    }
}

fields!(Struct4k, ArchivedStruct4k, |s| fold_all(
    s.head.as_ref().map_or(2, |h| h.checksum()),
    s.samples.iter().map(Bits::bits)
));

/// Samples in `struct4k`: 256 + 480 x 8 = 4096 bytes.
pub const STRUCT4K_SAMPLES: usize = 480;

message! {
    /// `seq:N`: a bounded sequence of N `struct16`.
    pub struct Sequence {
        #[prost(message, repeated, tag = "1")]
        pub items: Vec<Struct16>,
    }
}

fields!(Sequence, ArchivedSequence, |s| fold_all(
    3,
    s.items.iter().map(|i| i.checksum())
));

message! {
    /// `string:N`: N printable ASCII characters.
    pub struct Text {
        #[prost(string, tag = "1")]
        pub text: String,
    }
}

fields!(Text, ArchivedText, |s| fold_all(
    4,
    s.text.as_str().bytes().map(u64::from)
));

scalars! {
    /// A point of a cloud: x, y, z and intensity.
    Point / ArchivedPoint {
        x: f32 = float, "1";
        y: f32 = float, "2";
        z: f32 = float, "3";
        intensity: f32 = float, "4";
    }
}

message! {
    /// `pointcloud:N`: a stamp, a frame name and N points.
    pub struct PointCloud {
        #[prost(uint64, tag = "1")]
        pub stamp_ns: u64,
        #[prost(string, tag = "2")]
        pub frame: String,
        #[prost(message, repeated, tag = "3")]
        pub points: Vec<Point>,
    }
}

fields!(PointCloud, ArchivedPointCloud, |s| fold_all(
    fold_all(
        fold_all(5, [s.stamp_ns.bits()]),
        s.frame.as_str().bytes().map(u64::from)
    ),
    s.points.iter().map(|p| p.checksum())
));

message! {
    /// `nml`: NML's test message, which rotated through the basic types at one length: each
    /// value fills one of these arrays to the same number of bytes and leaves the others empty
    /// (a union every format carries; protobuf has no 8- or 16-bit integers, nor repeated fields
    /// in a oneof).
    pub struct Nml {
        #[prost(bytes = "vec", tag = "1")]
        pub chars: Vec<u8>,
        #[prost(int32, repeated, tag = "2")]
        pub ints: Vec<i32>,
        #[prost(uint32, repeated, tag = "3")]
        pub uints: Vec<u32>,
        #[prost(int64, repeated, tag = "4")]
        pub longs: Vec<i64>,
        #[prost(uint64, repeated, tag = "5")]
        pub ulongs: Vec<u64>,
        #[prost(float, repeated, tag = "6")]
        pub floats: Vec<f32>,
        #[prost(double, repeated, tag = "7")]
        pub doubles: Vec<f64>,
        #[prost(bool, repeated, tag = "8")]
        pub bools: Vec<bool>,
    }
}

fields!(Nml, ArchivedNml, |s| {
    let acc = fold_all(6, s.chars.iter().map(Bits::bits));
    let acc = fold_all(acc, s.ints.iter().map(Bits::bits));
    let acc = fold_all(acc, s.uints.iter().map(Bits::bits));
    let acc = fold_all(acc, s.longs.iter().map(Bits::bits));
    let acc = fold_all(acc, s.ulongs.iter().map(Bits::bits));
    let acc = fold_all(acc, s.floats.iter().map(Bits::bits));
    let acc = fold_all(acc, s.doubles.iter().map(Bits::bits));
    fold_all(acc, s.bools.iter().map(Bits::bits))
});

/// The basic types `nml` rotates through.
pub const NML_KINDS: usize = 8;

impl Nml {
    /// Value `kind` of the rotation, `bytes` long in memory.
    fn seeded(r: &mut Seeded, kind: usize, bytes: usize) -> Self {
        let mut m = Nml::default();
        match kind % NML_KINDS {
            0 => m.chars = (0..bytes).map(|_| r.letter() as u8).collect(),
            1 => m.ints = (0..bytes / 4).map(|_| r.next_u64() as i32).collect(),
            2 => m.uints = (0..bytes / 4).map(|_| r.next_u64() as u32).collect(),
            3 => m.longs = (0..bytes / 8).map(|_| r.next_u64() as i64).collect(),
            4 => m.ulongs = (0..bytes / 8).map(|_| r.next_u64()).collect(),
            5 => m.floats = (0..bytes / 4).map(|_| r.f32()).collect(),
            6 => m.doubles = (0..bytes / 8).map(|_| r.f64()).collect(),
            _ => m.bools = (0..bytes).map(|_| r.next_u64() & 1 == 1).collect(),
        }
        m
    }
}

/// A message type and its size parameter, as `--payload` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeSpec {
    Array(usize),
    Struct16,
    Struct256,
    Struct4k,
    Seq(usize),
    Text(usize),
    PointCloud(usize),
    Nml(usize),
}

/// `nml` without a length: NML's smallest test message.
pub const NML_DEFAULT_BYTES: usize = 200;

/// What each type is, for help and errors.
pub const TYPES: &[(&str, &str)] = &[
    ("array:N", "N doubles"),
    ("struct16", "a 16-byte record of three fields"),
    (
        "struct256",
        "a 256-byte record of 38 fields (a robot's state)",
    ),
    ("struct4k", "a struct256 header and 480 doubles, 4096 bytes"),
    ("seq:N", "a sequence of N struct16"),
    ("string:N", "N ASCII characters"),
    (
        "pointcloud:N",
        "N points of x, y, z, intensity (floats), a stamp and a frame name",
    ),
    (
        "nml[:N]",
        "NML's rotation through 8 basic types at N bytes (default 200)",
    ),
];

impl TypeSpec {
    pub fn parse(text: &str) -> Result<TypeSpec, String> {
        let (name, n) = match text.split_once(':') {
            Some((name, n)) => {
                let n = crate::units::parse_size(n).map_err(|e| {
                    format!("`{text}`: the count after `{name}:` is not a number ({e})")
                })?;
                (name, Some(n))
            }
            None => (text, None),
        };
        let counted = |make: fn(usize) -> TypeSpec| match n {
            Some(0) => Err(format!("`{text}` holds nothing: give a count from 1")),
            Some(n) => Ok(make(n)),
            None => Err(format!("`{name}` needs a count: e.g. `{name}:100`")),
        };
        let fixed = |t: TypeSpec| match n {
            None => Ok(t),
            Some(_) => Err(format!("`{name}` has a fixed size: write `{name}` alone")),
        };
        match name {
            "array" => counted(TypeSpec::Array),
            "seq" => counted(TypeSpec::Seq),
            "string" => counted(TypeSpec::Text),
            "pointcloud" => counted(TypeSpec::PointCloud),
            "struct16" => fixed(TypeSpec::Struct16),
            "struct256" => fixed(TypeSpec::Struct256),
            "struct4k" => fixed(TypeSpec::Struct4k),
            "nml" => match n {
                None => Ok(TypeSpec::Nml(NML_DEFAULT_BYTES)),
                Some(n) if n >= 8 => Ok(TypeSpec::Nml(n)),
                Some(_) => Err(format!("`{text}` is below one double: give nml:8 or more")),
            },
            _ => Err(format!(
                "`{name}` is not a message type: use one of {}",
                TYPES.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// The bytes its fields take in memory (the raw copy's size, before any length prefix).
    pub fn field_bytes(self) -> usize {
        match self {
            TypeSpec::Array(n) => 8 * n,
            TypeSpec::Struct16 => 16,
            TypeSpec::Struct256 => 256,
            TypeSpec::Struct4k => 256 + 8 * STRUCT4K_SAMPLES,
            TypeSpec::Seq(n) => 16 * n,
            TypeSpec::Text(n) => n,
            TypeSpec::PointCloud(n) => 8 + 8 + 16 * n,
            TypeSpec::Nml(n) => n,
        }
    }

    /// How many distinct values a run rotates through (NML's rotation: one per basic type).
    pub fn rotation(self) -> usize {
        match self {
            TypeSpec::Nml(_) => NML_KINDS,
            _ => 4,
        }
    }
}

impl std::fmt::Display for TypeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TypeSpec::Array(n) => write!(f, "array:{n}"),
            TypeSpec::Struct16 => write!(f, "struct16"),
            TypeSpec::Struct256 => write!(f, "struct256"),
            TypeSpec::Struct4k => write!(f, "struct4k"),
            TypeSpec::Seq(n) => write!(f, "seq:{n}"),
            TypeSpec::Text(n) => write!(f, "string:{n}"),
            TypeSpec::PointCloud(n) => write!(f, "pointcloud:{n}"),
            TypeSpec::Nml(n) => write!(f, "nml:{n}"),
        }
    }
}

/// The values of a run, one list per type: what a format's codec is made from.
pub enum Values {
    Array(Vec<Array>),
    Struct16(Vec<Struct16>),
    Struct256(Vec<Struct256>),
    Struct4k(Vec<Struct4k>),
    Seq(Vec<Sequence>),
    Text(Vec<Text>),
    PointCloud(Vec<PointCloud>),
    Nml(Vec<Nml>),
}

impl Values {
    /// `ty`'s rotation of values from `seed`.
    pub fn new(ty: TypeSpec, seed: u64) -> Values {
        let mut r = Seeded::new(seed);
        let k = ty.rotation();
        let r = &mut r;
        match ty {
            TypeSpec::Array(n) => Values::Array(
                (0..k)
                    .map(|_| Array {
                        values: (0..n).map(|_| r.f64()).collect(),
                    })
                    .collect(),
            ),
            TypeSpec::Struct16 => Values::Struct16((0..k).map(|_| Struct16::seeded(r)).collect()),
            TypeSpec::Struct256 => {
                Values::Struct256((0..k).map(|_| Struct256::seeded(r)).collect())
            }
            TypeSpec::Struct4k => Values::Struct4k(
                (0..k)
                    .map(|_| Struct4k {
                        head: Some(Struct256::seeded(r)),
                        samples: (0..STRUCT4K_SAMPLES).map(|_| r.f64()).collect(),
                    })
                    .collect(),
            ),
            TypeSpec::Seq(n) => Values::Seq(
                (0..k)
                    .map(|_| Sequence {
                        items: (0..n).map(|_| Struct16::seeded(r)).collect(),
                    })
                    .collect(),
            ),
            TypeSpec::Text(n) => Values::Text(
                (0..k)
                    .map(|_| Text {
                        text: (0..n).map(|_| r.letter()).collect(),
                    })
                    .collect(),
            ),
            TypeSpec::PointCloud(n) => Values::PointCloud(
                (0..k)
                    .map(|_| PointCloud {
                        stamp_ns: r.next_u64(),
                        frame: (0..8).map(|_| r.letter()).collect(),
                        points: (0..n).map(|_| Point::seeded(r)).collect(),
                    })
                    .collect(),
            ),
            TypeSpec::Nml(bytes) => Values::Nml((0..k).map(|i| Nml::seeded(r, i, bytes)).collect()),
        }
    }

    /// Each value's checksum, in rotation order.
    pub fn checksums(&self) -> Vec<u64> {
        fn sums<T: Fields>(v: &[T]) -> Vec<u64> {
            v.iter().map(Fields::checksum).collect()
        }
        match self {
            Values::Array(v) => sums(v),
            Values::Struct16(v) => sums(v),
            Values::Struct256(v) => sums(v),
            Values::Struct4k(v) => sums(v),
            Values::Seq(v) => sums(v),
            Values::Text(v) => sums(v),
            Values::PointCloud(v) => sums(v),
            Values::Nml(v) => sums(v),
        }
    }
}

/// `match` over [`Values`] with the same expression for every type: `$v` is the list, `$T`
/// its element type. A format's codec is made with it once, outside any loop.
macro_rules! for_each_type {
    ($values:expr, $v:ident: $T:ident => $body:expr) => {
        $crate::codec::types::for_each_type!(@arms $values, $v, $T, $body;
            Array: Array, Struct16: Struct16, Struct256: Struct256, Struct4k: Struct4k,
            Seq: Sequence, Text: Text, PointCloud: PointCloud, Nml: Nml)
    };
    (@arms $values:expr, $v:ident, $T:ident, $body:expr; $($variant:ident: $ty:ident),*) => {{
        use $crate::codec::types as t;
        match $values {
            $(t::Values::$variant($v) => {
                type $T = t::$ty;
                $body
            })*
        }
    }};
}
pub(crate) use for_each_type;
