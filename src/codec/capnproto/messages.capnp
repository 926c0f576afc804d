# The typed messages of `--payload TYPE:capnp`, as src/codec/types.rs declares them (the same
# fields in the same order). Regenerate messages_capnp.rs with ./generate.sh after a change.
@0xc2f6b1d3a4e59687;

struct Array {
  values @0 :List(Float64);
}

struct Struct16 {
  id @0 :UInt64;
  count @1 :UInt32;
  value @2 :Float32;
}

struct Struct256 {
  id @0 :UInt64;
  stampNs @1 :UInt64;
  x @2 :Float64;
  y @3 :Float64;
  z @4 :Float64;
  qx @5 :Float64;
  qy @6 :Float64;
  qz @7 :Float64;
  qw @8 :Float64;
  vx @9 :Float64;
  vy @10 :Float64;
  vz @11 :Float64;
  wx @12 :Float64;
  wy @13 :Float64;
  wz @14 :Float64;
  covX @15 :Float64;
  covY @16 :Float64;
  covZ @17 :Float64;
  covRoll @18 :Float64;
  covPitch @19 :Float64;
  covYaw @20 :Float64;
  covVx @21 :Float64;
  covVy @22 :Float64;
  covVz @23 :Float64;
  covWx @24 :Float64;
  covWy @25 :Float64;
  status @26 :UInt32;
  mode @27 :UInt32;
  source @28 :UInt32;
  target @29 :UInt32;
  frame @30 :Int32;
  quality @31 :Int32;
  retries @32 :UInt32;
  faults @33 :UInt32;
  gainP @34 :Float32;
  gainI @35 :Float32;
  gainD @36 :Float32;
  gainFf @37 :Float32;
}

struct Struct4k {
  head @0 :Struct256;
  samples @1 :List(Float64);
}

struct Sequence {
  items @0 :List(Struct16);
}

struct TextMsg {
  text @0 :Text;
}

struct Point {
  x @0 :Float32;
  y @1 :Float32;
  z @2 :Float32;
  intensity @3 :Float32;
}

struct PointCloud {
  stampNs @0 :UInt64;
  frame @1 :Text;
  points @2 :List(Point);
}

struct Nml {
  chars @0 :Data;
  ints @1 :List(Int32);
  uints @2 :List(UInt32);
  longs @3 :List(Int64);
  ulongs @4 :List(UInt64);
  floats @5 :List(Float32);
  doubles @6 :List(Float64);
  bools @7 :List(Bool);
}
