//! The prelude (`prelude.js`), compiled once per process: the first interpreter parses it and
//! keeps its bytecode, every later one reads that bytecode (QuickJS's own object format)
//! instead of parsing the text again. Parsing cost an interpreter about 2.3M instructions, most
//! of its preparation; a run that finds no prepared interpreter waits for it.
//!
//! Guarantees: the prelude is a plain global script, as it was when evaluated from text (no
//! module is registered that a program could `import`); the bytecode comes only from this
//! process's own compile of the embedded text, by the same QuickJS, so it is valid input for
//! `JS_ReadObject`; a compile or read that fails is an error of the interpreter's start, as a
//! failed evaluation was.

use std::ffi::c_char;
use std::sync::OnceLock;

use rquickjs::{Ctx, Function, Value, qjs};

/// The prelude's text, NUL-terminated as `JS_Eval` requires.
const SOURCE: &str = concat!(include_str!("prelude.js"), "\0");

/// The file name errors and stack traces give the prelude.
const FILE_NAME: &std::ffi::CStr = c"prelude.js";

/// The compiled prelude, once an interpreter made it.
static BYTECODE: OnceLock<Box<[u8]>> = OnceLock::new();

/// The prelude's function (what evaluating `prelude.js` gives), in `ctx`. On
/// `rquickjs::Error::Exception` the exception is left in the context for the caller.
pub(crate) fn load<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    let compiled = match BYTECODE.get() {
        Some(bytes) => read(ctx, bytes)?,
        None => {
            let compiled = compile(ctx)?;
            if let Some(bytes) = write(ctx, &compiled) {
                let _ = BYTECODE.set(bytes);
            }
            compiled
        }
    };
    let value = evaluate(ctx, &compiled)?;
    value.into_function().ok_or(rquickjs::Error::Unknown)
}

/// Wraps what a QuickJS call returned: the value it owns, or the pending exception.
fn owned<'js>(ctx: &Ctx<'js>, raw: qjs::JSValue) -> rquickjs::Result<Value<'js>> {
    // SAFETY: reads the value's tag only.
    #[allow(unsafe_code)]
    if unsafe { qjs::JS_IsException(raw) } {
        return Err(rquickjs::Error::Exception);
    }
    // SAFETY: `raw` is a value QuickJS just returned to us with its reference, in this
    // context's runtime; the `Value` takes that one reference and releases it on drop.
    #[allow(unsafe_code)]
    Ok(unsafe { Value::from_raw(ctx.clone(), raw) })
}

/// Parses the text into a function bytecode object, without running it.
fn compile<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Value<'js>> {
    let flags = (qjs::JS_EVAL_TYPE_GLOBAL | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as i32;
    // SAFETY: a live context; `SOURCE` is NUL-terminated at `len` (as `JS_Eval` requires) and
    // `FILE_NAME` is a C string; both are static. The result is wrapped once by `owned`.
    #[allow(unsafe_code)]
    let raw = unsafe {
        qjs::JS_Eval(
            ctx.as_raw().as_ptr(),
            SOURCE.as_ptr().cast::<c_char>(),
            (SOURCE.len() - 1) as qjs::size_t,
            FILE_NAME.as_ptr(),
            flags,
        )
    };
    owned(ctx, raw)
}

/// The bytecode of `compiled` (source text left out), or `None` if it could not be written
/// (every interpreter then parses the text).
fn write(ctx: &Ctx<'_>, compiled: &Value<'_>) -> Option<Box<[u8]>> {
    let mut len: qjs::size_t = 0;
    let flags = (qjs::JS_WRITE_OBJ_BYTECODE | qjs::JS_WRITE_OBJ_STRIP_SOURCE) as i32;
    // SAFETY: a live context and a live function bytecode object of it; `len` is a valid
    // out-pointer. The returned buffer (`len` bytes, allocated by QuickJS) is copied, then
    // released once with `js_free`.
    #[allow(unsafe_code)]
    unsafe {
        let buf = qjs::JS_WriteObject(ctx.as_raw().as_ptr(), &mut len, compiled.as_raw(), flags);
        if buf.is_null() {
            let _ = ctx.catch();
            return None;
        }
        let bytes: Box<[u8]> = std::slice::from_raw_parts(buf, len as usize).into();
        qjs::js_free(ctx.as_raw().as_ptr(), buf.cast());
        Some(bytes)
    }
}

/// Reads the bytecode back into a function bytecode object of `ctx`.
fn read<'js>(ctx: &Ctx<'js>, bytes: &[u8]) -> rquickjs::Result<Value<'js>> {
    // SAFETY: a live context; `bytes` is what `write` produced in this process from the
    // compile of `SOURCE` by this same QuickJS, so it is valid bytecode for it; QuickJS copies
    // what it keeps. The result is wrapped once by `owned`.
    #[allow(unsafe_code)]
    let raw = unsafe {
        qjs::JS_ReadObject(
            ctx.as_raw().as_ptr(),
            bytes.as_ptr(),
            bytes.len() as qjs::size_t,
            qjs::JS_READ_OBJ_BYTECODE as i32,
        )
    };
    owned(ctx, raw)
}

/// Runs the compiled script and returns its value.
fn evaluate<'js>(ctx: &Ctx<'js>, compiled: &Value<'js>) -> rquickjs::Result<Value<'js>> {
    // SAFETY: `JS_EvalFunction` consumes one reference of its argument, so it is given a new
    // one (`JS_DupValue`); `compiled` keeps its own until it drops. The result is wrapped once.
    #[allow(unsafe_code)]
    let raw = unsafe {
        let fun = qjs::JS_DupValue(ctx.as_raw().as_ptr(), compiled.as_raw());
        qjs::JS_EvalFunction(ctx.as_raw().as_ptr(), fun)
    };
    owned(ctx, raw)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use rquickjs::{Context, Runtime};

    use super::{BYTECODE, load};

    /// The prelude read from bytecode is the prelude: the same function as its text gives.
    #[test]
    fn the_prelude_from_bytecode_is_the_prelude_from_text() {
        let source_of = || {
            let runtime = Runtime::new().expect("runtime");
            let context = Context::full(&runtime).expect("context");
            context.with(|ctx| {
                let f = load(&ctx).expect("prelude");
                (
                    f.get::<_, usize>("length").expect("length"),
                    BYTECODE.get().is_some(),
                )
            })
        };
        let (first, _) = source_of();
        let (second, cached) = source_of();
        assert!(cached, "the first interpreter keeps the bytecode");
        assert_eq!(first, 9, "the prelude takes the host's nine values");
        assert_eq!(second, first);
    }
}
