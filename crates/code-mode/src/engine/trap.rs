//! The `get` trap of the `tools` proxy, as a native function: a program reads a binding
//! (`tools.read`) at every call, and a trap written in JavaScript costs a frame of the
//! interpreter each time. The trap answers what the target holds (a binding, or anything under
//! a symbol); `then` and `toJSON` stay absent, so `tools` is neither a thenable nor
//! serialized through a call; any other name is handed to the prelude's `unknown(name)`,
//! whose function rejects naming the tools there are.
//!
//! Guarantees: the trap runs no JavaScript but `unknown` (on a name that is no tool), reads
//! the target as `Reflect.get` would (the target is an ordinary frozen object without a
//! prototype, holding only functions: no getter to run), and leaves every reference it takes
//! released or returned.

use std::ffi::c_int;

use rquickjs::atom::PredefinedAtom;
use rquickjs::{Ctx, Function, Value, qjs};

/// The trap, with `unknown` kept as its data.
pub(crate) fn make<'js>(ctx: &Ctx<'js>, unknown: &Function<'js>) -> rquickjs::Result<Value<'js>> {
    let mut data = [unknown.as_raw()];
    // SAFETY: a live context; `data` holds one live value, which `JS_NewCFunctionData`
    // duplicates into the function it makes (it takes its data as `JSValueConst`), so the
    // caller's `unknown` keeps its own reference. `get` matches `JSCFunctionData`. The result
    // is an owned reference (or the exception marker), wrapped once below.
    #[allow(unsafe_code)]
    let made = unsafe {
        qjs::JS_NewCFunctionData(ctx.as_raw().as_ptr(), Some(get), 3, 0, 1, data.as_mut_ptr())
    };
    // SAFETY: reads the tag of the value just returned.
    #[allow(unsafe_code)]
    if unsafe { qjs::JS_IsException(made) } {
        return Err(rquickjs::Error::Exception);
    }
    // SAFETY: `made` is a function `JS_NewCFunctionData` returned, owned by us, wrapped once.
    #[allow(unsafe_code)]
    Ok(unsafe { Value::from_raw(ctx.clone(), made) })
}

/// `get(target, key, receiver)`.
///
/// # Safety
/// Called by QuickJS only, as the function `make` built: `ctx` is live; `argv` holds at least
/// three values (the function's length is 3 and QuickJS pads a shorter call with `undefined`),
/// all borrowed for the call; `data` holds the one value `make` gave it.
#[allow(unsafe_code)]
unsafe extern "C" fn get(
    ctx: *mut qjs::JSContext,
    _this: qjs::JSValue,
    _argc: c_int,
    argv: *mut qjs::JSValue,
    _magic: c_int,
    data: *mut qjs::JSValue,
) -> qjs::JSValue {
    // SAFETY: see the function's contract: `argv` has at least two readable values.
    let (target, key) = unsafe { (*argv, *argv.add(1)) };
    // SAFETY: a live context and a borrowed key; a returned atom is an owned reference,
    // released below exactly once.
    let atom = unsafe { qjs::JS_ValueToAtom(ctx, key) };
    if atom == qjs::JS_ATOM_NULL {
        return qjs::JS_EXCEPTION;
    }
    // SAFETY: a live context, a borrowed target and a held atom: an ordinary object without a
    // prototype, whose own properties are data, so no code runs. The result is owned.
    let found = unsafe { qjs::JS_GetProperty(ctx, target, atom) };
    let absent = atom == PredefinedAtom::Then as qjs::JSAtom
        || atom == PredefinedAtom::ToJSON as qjs::JSAtom;
    // SAFETY: the atom taken above, released once and not used after.
    unsafe { qjs::JS_FreeAtom(ctx, atom) };
    // SAFETY: tags are read from values alive for the call.
    let answer = unsafe {
        qjs::JS_IsException(found) || qjs::JS_IsFunction(ctx, found) || !qjs::JS_IsString(key)
    };
    if answer || absent {
        return found;
    }
    // SAFETY: `found` is owned (here `undefined`) and released once; `data` holds `unknown`
    // (borrowed, as `JS_Call` takes it) and `argv.add(1)` the key, one argument; the result is
    // owned and handed to QuickJS.
    unsafe {
        qjs::JS_FreeValue(ctx, found);
        qjs::JS_Call(ctx, *data, qjs::JS_UNDEFINED, 1, argv.add(1))
    }
}
