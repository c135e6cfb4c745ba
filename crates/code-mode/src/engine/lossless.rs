//! The lossless check of what a program hands to the host (a tool call's arguments, the value
//! it returns): a `JSON.stringify` replacer, native, that refuses any value JSON would silently
//! change (a non-finite number, an `undefined` array element, an object with a prototype other
//! than `Object.prototype` or `null`, a `BigInt`, a function, a symbol).
//!
//! It is the replacer's protocol, not a serializer of its own: QuickJS's `JSON.stringify` still
//! walks the value, calls `toJSON`, reads getters and proxies, detects cycles and writes the
//! text, and calls this function for every value it is about to write (after `toJSON`), with
//! the holder as `this`. Native, it costs a sub-call a few hundred instructions where the same
//! check in JavaScript cost thousands.
//!
//! Guarantees: the builtins it relies on (`Object.prototype`, `Object.getPrototypeOf`,
//! `Array.isArray`, `Object.prototype.toString`) are captured before the program runs, so a
//! program that replaces them changes nothing; a proxy is asked through those builtins, as the
//! JavaScript check asked it (its traps run, and what they throw is the refusal); every refusal
//! is a `TypeError` whose message says what is not lossless.

use std::cell::RefCell;
use std::rc::Rc;

use rquickjs::function::This;
use rquickjs::{Ctx, Exception, Function, Object, Value};

use super::plain::Plain;

/// The builtins of a run, until it ends (see [`Realm::replacer`]).
pub(crate) type Held<'js> = Rc<RefCell<Option<Realm<'js>>>>;

/// The builtins the check relies on, as they were before the program ran.
pub(crate) struct Realm<'js> {
    object_proto: Object<'js>,
    get_proto: Function<'js>,
    is_array: Function<'js>,
    to_tag: Function<'js>,
    /// The read of plain arguments without `JSON.stringify` (engine/plain.rs).
    pub(crate) plain: Plain<'js>,
}

impl<'js> Realm<'js> {
    /// Captures the builtins from a context no program has run in yet.
    pub(crate) fn capture(ctx: &Ctx<'js>) -> rquickjs::Result<Realm<'js>> {
        let globals = ctx.globals();
        let object: Object = globals.get("Object")?;
        let array: Object = globals.get("Array")?;
        let object_proto: Object = object.get("prototype")?;
        Ok(Realm {
            get_proto: object.get("getPrototypeOf")?,
            is_array: array.get("isArray")?,
            to_tag: object_proto.get("toString")?,
            plain: Plain::capture(ctx, object_proto.clone())?,
            object_proto,
        })
    }

    /// The replacer: `value` as it is when JSON keeps it, else a `TypeError`. It reads the
    /// builtins from `held`, which the run empties when it ends: a value held by a native
    /// function is out of the garbage collector's sight, so the run lets go of them itself
    /// before the context is freed.
    pub(crate) fn replacer(ctx: &Ctx<'js>, held: Held<'js>) -> rquickjs::Result<Function<'js>> {
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  holder: This<Value<'js>>,
                  _key: Value<'js>,
                  value: Value<'js>|
                  -> rquickjs::Result<Value<'js>> {
                // Borrowed, not cloned (a clone is four reference counts up and down). A trap
                // the check runs may call a tool, whose arguments come back here: shared
                // borrows nest; the run takes the builtins only once no code runs.
                let realm = held.borrow();
                match realm.as_ref() {
                    Some(realm) => realm.check(&ctx, &holder.0, value),
                    None => Err(Exception::throw_internal(&ctx, "the run is over")),
                }
            },
        )
    }

    fn check(
        &self,
        ctx: &Ctx<'js>,
        holder: &Value<'js>,
        value: Value<'js>,
    ) -> rquickjs::Result<Value<'js>> {
        if value.is_string() || value.is_bool() || value.is_null() {
            return Ok(value);
        }
        if let Some(n) = value.as_number() {
            if n.is_finite() {
                return Ok(value);
            }
            let shown = if n.is_nan() {
                "NaN"
            } else if n > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            };
            return Err(refuse(ctx, &format!("non-finite number {shown}")));
        }
        if value.is_undefined() {
            if self.array(holder)? {
                return Err(refuse(ctx, "an undefined array element"));
            }
            return Ok(value);
        }
        // `typeof` is "function" for anything callable, a proxy of a function included.
        if value.is_function() {
            return Err(refuse(ctx, "a function"));
        }
        if let Some(object) = value.as_object() {
            if self.array(&value)? {
                return Ok(value);
            }
            let proto = if value.is_proxy() {
                // Its `getPrototypeOf` trap runs, as `Object.getPrototypeOf` runs it.
                self.get_proto.call::<_, Value>((value.clone(),))?
            } else {
                // An ordinary object's prototype is read without running any code.
                object
                    .get_prototype()
                    .map_or_else(|| Value::new_null(ctx.clone()), Object::into_value)
            };
            if proto.is_null() || proto == *self.object_proto.as_value() {
                return Ok(value);
            }
            let tag = self
                .to_tag
                .call::<_, String>((This(value.clone()),))
                .unwrap_or_else(|_| {
                    // What the program's code threw is not the refusal: drop it.
                    let _ = ctx.catch();
                    "an object with a prototype".to_owned()
                });
            return Err(refuse(ctx, &tag));
        }
        if value.is_big_int() {
            return Err(refuse(ctx, "a BigInt"));
        }
        if value.is_symbol() {
            return Err(refuse(ctx, "a symbol"));
        }
        Err(refuse(ctx, &format!("a {} value", value.type_name())))
    }

    /// `Array.isArray(value)`: an array, or a proxy of one (asked through the captured builtin,
    /// which throws for a revoked proxy).
    fn array(&self, value: &Value<'js>) -> rquickjs::Result<bool> {
        if value.is_array() {
            return Ok(true);
        }
        if value.is_proxy() {
            return self.is_array.call((value.clone(),));
        }
        Ok(false)
    }
}

/// The `TypeError` saying that `what` is not lossless JSON.
fn refuse(ctx: &Ctx<'_>, what: &str) -> rquickjs::Error {
    Exception::throw_type(ctx, &format!("{what} is not lossless JSON"))
}
