// The bridge between a program and the host, evaluated once per run before the program.
// It receives five native functions (log a line; make a call of the binding at an index of
// the names with the arguments' JSON text and get its native promise; the same with the
// arguments' value, which answers `undefined` and calls nothing unless the value is plain
// data, engine/plain.rs; report the settled program; the `JSON.stringify` replacer that
// refuses what JSON would silently change, engine/lossless.rs) and the binding names,
// installs `console`, `tools` (a name that is no tool rejects, listing the tools) and
// `ToolCallError`, and returns the two entry points the host
// drives: start, and failure (the rejection value of a failed call).
// Every builtin it relies on is captured here, before the program can replace it.
(function (hostLog, hostCall, hostCallPlain, hostDone, lossless, namesJson, argsPrefix, missingArgs) {
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
  const tools = create(null);
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    const index = i;
    // A plain function returning a native promise (made by the host): `await` on it never
    // looks up `then`, so a program that replaces `Promise.prototype.then` cannot intercept
    // tool results.
    const binding = function (args) {
      try {
        // No argument at all reads as `undefined` too; `arguments` is not touched, so no
        // arguments object is made for each call.
        if (args === undefined) {
          return rejected(new ToolCallError(name, argsPrefix + ": " + missingArgs));
        }
        // Plain data is read by the host as it is; anything else (a proxy, a getter, a
        // `toJSON`, a class instance, ...) goes through `JSON.stringify` with the check.
        const called = hostCallPlain(index, args);
        if (called !== undefined) {
          return called;
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
    };
    defineProperty(binding, "name", { value: name });
    defineProperty(tools, name, { value: binding, enumerable: true });
  }
  freeze(tools);

  // A name that is not a tool answers with a function that rejects, naming the tools there
  // are, instead of `undefined` (whose call would be `TypeError: not a function`). `then` and
  // `toJSON` stay absent, so `tools` is neither a thenable nor serialized through a call.
  const known = names.length > 0 ? names.join(", ") : "(none)";
  const absent = create(null);
  absent.then = true;
  absent.toJSON = true;
  const handler = create(null);
  handler.get = function (target, key) {
    // `target` has no prototype and holds only functions: a name it answers is a binding.
    const found = target[key];
    if (found !== undefined || typeof key !== "string" || absent[key] === true) {
      return found;
    }
    const missing = function () {
      return rejected(new ToolCallError(key, "unknown tool \"" + key + "\"; tools: " + known));
    };
    defineProperty(missing, "name", { value: key });
    return missing;
  };
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
