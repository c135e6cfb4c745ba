// The bridge between a program and the host, evaluated once per run before the program.
// It receives six native functions (log a line; make a call of the binding at an index of
// the names with the arguments' JSON text and get its native promise; make the binding
// functions, which call straight from plain data, engine/plain.rs, and hand anything else to
// the JavaScript path given to them; make the `get` trap of `tools`, engine/trap.rs; report
// the settled program; the `JSON.stringify` replacer that refuses what JSON would silently
// change, engine/lossless.rs) and the binding names, installs `console`, `tools` (a name
// that is no tool rejects, listing the tools) and `ToolCallError`, and returns the two entry
// points the host drives: start, and failure (the rejection value of a failed call).
// Every builtin it relies on is captured here, before the program can replace it.
(function (hostLog, hostCall, hostBind, hostTrap, hostDone, lossless, namesJson, argsPrefix, missingArgs) {
  "use strict";
  const create = Object.create;
  const defineProperty = Object.defineProperty;
  const freeze = Object.freeze;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const StringCtor = String;
  const ErrorCtor = Error;
  const PromiseCtor = Promise;
  const ProxyCtor = Proxy;
  const then = PromiseCtor.prototype.then;
  const promiseReject = PromiseCtor.reject;
  const call = Function.prototype.call;
  const AsyncFunction = (async function () {}).constructor;
  const UNPRINTABLE = "<unprintable thrown value>";

  function rejected(e) {
    return call.call(promiseReject, PromiseCtor, e);
  }

  function callThen(p, onOk, onErr) {
    return call.call(then, p, onOk, onErr);
  }

  // `Name: message` for errors, the text itself for strings, String(v) otherwise.
  function describe(e) {
    try {
      if (e !== null && typeof e === "object" && typeof e.message === "string") {
        const name = typeof e.name === "string" && e.name ? e.name : "Error";
        return e.message ? name + ": " + e.message : name;
      }
      return StringCtor(e);
    } catch (_) {
      return UNPRINTABLE;
    }
  }

  // The message alone (argument rejections quote the cause without its class).
  function reason(e) {
    try {
      if (e !== null && typeof e === "object" && typeof e.message === "string") {
        return e.message;
      }
      return StringCtor(e);
    } catch (_) {
      return UNPRINTABLE;
    }
  }

  function show(v) {
    try {
      switch (typeof v) {
        case "string":
          return v;
        case "undefined":
          return "undefined";
        case "function":
          return v.name ? "[Function: " + v.name + "]" : "[Function (anonymous)]";
        case "bigint":
          return StringCtor(v) + "n";
        case "symbol":
          return call.call(Symbol.prototype.toString, v);
        case "object": {
          if (v === null) {
            return "null";
          }
          if (v instanceof ErrorCtor) {
            return describe(v);
          }
          const s = stringify(v);
          if (s !== undefined) {
            return s;
          }
          return StringCtor(v);
        }
        default:
          return StringCtor(v);
      }
    } catch (_) {
      try {
        return StringCtor(v);
      } catch (_) {
        return UNPRINTABLE;
      }
    }
  }

  function logger() {
    return function () {
      let line = "";
      for (let i = 0; i < arguments.length; i++) {
        if (i > 0) {
          line += " ";
        }
        line += show(arguments[i]);
      }
      hostLog(line);
    };
  }

  const consoleObject = create(null);
  const levels = ["log", "info", "warn", "error", "debug"];
  for (let i = 0; i < levels.length; i++) {
    defineProperty(consoleObject, levels[i], { value: logger(), enumerable: true });
  }
  freeze(consoleObject);
  defineProperty(globalThis, "console", { value: consoleObject });

  class ToolCallError extends ErrorCtor {
    constructor(toolName, message) {
      super(message);
      defineProperty(this, "name", { value: "ToolCallError", writable: true, configurable: true });
      this.toolName = toolName;
    }
  }
  defineProperty(globalThis, "ToolCallError", { value: ToolCallError });

  // Shared memory and blocking waits have no use without threads, and a blocking wait would
  // stall the interpreter where the interrupt handler cannot reach it.
  delete globalThis.Atomics;
  delete globalThis.SharedArrayBuffer;

  const names = parse(namesJson);
  // The path of a call whose argument is not plain data: written with `JSON.stringify` and
  // the check, then made with `hostCall`. Every failure is a rejection.
  function slow(index, args) {
    const name = names[index];
    try {
      if (typeof args === "undefined") {
        return rejected(new ToolCallError(name, argsPrefix + ": " + missingArgs));
      }
      let text;
      try {
        text = stringify(args, lossless);
      } catch (e) {
        return rejected(new ToolCallError(name, argsPrefix + ": " + reason(e)));
      }
      if (text === undefined) {
        return rejected(new ToolCallError(name, argsPrefix + ": " + missingArgs));
      }
      return hostCall(index, text);
    } catch (e) {
      return rejected(e);
    }
  }
  // Native functions made by the host, one for each name: each reads plain data
  // (engine/plain.rs) straight into a call and answers the call's native promise, whose
  // `await` never looks up `then` (a program that replaces `Promise.prototype.then` cannot
  // intercept tool results); anything else (no argument, a proxy, a getter, a `toJSON`, a
  // class instance, ...) goes to `slow`. A binding never throws.
  const bindings = hostBind(slow);
  const tools = create(null);
  for (let i = 0; i < names.length; i++) {
    defineProperty(tools, names[i], { value: bindings[i], enumerable: true });
  }
  freeze(tools);

  // A name that is not a tool answers with a function that rejects, naming the tools there
  // are, instead of `undefined` (whose call would be `TypeError: not a function`). The trap
  // is native (engine/trap.rs): it answers what `tools` holds, keeps `then` and `toJSON`
  // absent (so `tools` is neither a thenable nor serialized through a call), and asks
  // `unknown` about any other name.
  const known = names.length > 0 ? names.join(", ") : "(none)";
  function unknown(key) {
    const missing = function () {
      return rejected(new ToolCallError(key, "unknown tool \"" + key + "\"; tools: " + known));
    };
    defineProperty(missing, "name", { value: key });
    return missing;
  }
  const handler = create(null);
  handler.get = hostTrap(unknown);
  freeze(handler);
  defineProperty(globalThis, "tools", { value: new ProxyCtor(tools, handler) });

  function outcome(ok, kind, message, json) {
    const o = create(null);
    o.ok = ok;
    if (kind !== undefined) {
      o.kind = kind;
      o.message = message;
    }
    if (json !== undefined) {
      o.json = json;
    }
    return o;
  }

  function finish(value) {
    if (value === undefined) {
      return outcome(true);
    }
    let text;
    try {
      text = stringify(value, lossless);
    } catch (e) {
      return outcome(false, "invalid-output", "the returned value is not lossless JSON: " + reason(e));
    }
    return outcome(true, undefined, undefined, text);
  }

  function report(state) {
    hostDone(stringify(state));
  }

  function start(src) {
    let main;
    try {
      main = new AsyncFunction(src);
    } catch (e) {
      report(outcome(false, "exception", describe(e)));
      return;
    }
    callThen(
      main(),
      function (v) {
        report(finish(v));
      },
      function (e) {
        report(outcome(false, "exception", describe(e)));
      }
    );
  }

  function failure(toolName, message) {
    return new ToolCallError(toolName, message);
  }

  return { start: start, failure: failure };
})
