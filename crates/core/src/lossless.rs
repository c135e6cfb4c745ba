//! A serializer that only inspects: it fails on the one thing `serde_json` would silently change
//! (a NaN or infinite float becomes `null`), so snapshots are lossless or an error.

use serde::ser::{self, Serialize};

use crate::json::JsonError;

/// Fails with [`JsonError::NonFinite`] if `value` would serialize a NaN or an infinity.
pub(crate) fn check_finite<T: Serialize + ?Sized>(value: &T) -> Result<(), JsonError> {
    stacker::maybe_grow(64 * 1024, 4 << 20, || value.serialize(Check)).map_err(|e| match e {
        CheckError::NonFinite(s) => JsonError::NonFinite(s),
        CheckError::Custom(s) => JsonError::Snapshot(s),
    })
}

#[derive(Debug)]
enum CheckError {
    NonFinite(String),
    Custom(String),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::NonFinite(s) => write!(f, "non-finite number {s}"),
            CheckError::Custom(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for CheckError {}

impl ser::Error for CheckError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CheckError::Custom(msg.to_string())
    }
}

struct Check;

type R = Result<(), CheckError>;

fn float(v: f64) -> R {
    if v.is_finite() {
        Ok(())
    } else {
        Err(CheckError::NonFinite(v.to_string()))
    }
}

fn nested<T: Serialize + ?Sized>(value: &T) -> R {
    stacker::maybe_grow(64 * 1024, 4 << 20, || value.serialize(Check))
}

macro_rules! ok_scalars {
    ($($name:ident: $ty:ty),*) => { $(fn $name(self, _v: $ty) -> R { Ok(()) })* };
}

impl ser::Serializer for Check {
    type Ok = ();
    type Error = CheckError;
    type SerializeSeq = Check;
    type SerializeTuple = Check;
    type SerializeTupleStruct = Check;
    type SerializeTupleVariant = Check;
    type SerializeMap = Check;
    type SerializeStruct = Check;
    type SerializeStructVariant = Check;

    ok_scalars!(serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char,
        serialize_str: &str, serialize_bytes: &[u8]);

    fn serialize_f32(self, v: f32) -> R {
        float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> R {
        float(v)
    }
    fn serialize_none(self) -> R {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> R {
        nested(value)
    }
    fn serialize_unit(self) -> R {
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> R {
        Ok(())
    }
    fn serialize_unit_variant(self, _n: &'static str, _i: u32, _v: &'static str) -> R {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _n: &'static str, value: &T) -> R {
        nested(value)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        value: &T,
    ) -> R {
        nested(value)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Check, CheckError> {
        Ok(Check)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Check, CheckError> {
        Ok(Check)
    }
    fn serialize_tuple_struct(self, _n: &'static str, _l: usize) -> Result<Check, CheckError> {
        Ok(Check)
    }
    fn serialize_tuple_variant(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        _l: usize,
    ) -> Result<Check, CheckError> {
        Ok(Check)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Check, CheckError> {
        Ok(Check)
    }
    fn serialize_struct(self, _n: &'static str, _l: usize) -> Result<Check, CheckError> {
        Ok(Check)
    }
    fn serialize_struct_variant(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        _l: usize,
    ) -> Result<Check, CheckError> {
        Ok(Check)
    }
}

macro_rules! compound {
    ($($tr:ident :: $m:ident),*) => {$(
        impl ser::$tr for Check {
            type Ok = ();
            type Error = CheckError;
            fn $m<T: Serialize + ?Sized>(&mut self, value: &T) -> R { nested(value) }
            fn end(self) -> R { Ok(()) }
        }
    )*};
}
compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Check {
    type Ok = ();
    type Error = CheckError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> R {
        nested(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> R {
        nested(value)
    }
    fn end(self) -> R {
        Ok(())
    }
}

impl ser::SerializeStruct for Check {
    type Ok = ();
    type Error = CheckError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _k: &'static str, value: &T) -> R {
        nested(value)
    }
    fn end(self) -> R {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Check {
    type Ok = ();
    type Error = CheckError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _k: &'static str, value: &T) -> R {
        nested(value)
    }
    fn end(self) -> R {
        Ok(())
    }
}
