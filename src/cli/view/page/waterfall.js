// dsh view: the waterfall of one step, one bar per call. With dsh's stage timing
// (`dsh/step-timing`) a bar spans the call's time in the step, shaded by stage, and a
// `run_code`'s sub-calls get thin bars of their own in lanes right under it; a log without it
// (the reference harness's) gets bars in model order and no durations.
"use strict";

const STAGES = ["waiting", "prepare", "approval", "dispatch", "post-execute"];

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

// The stage segments of a call's timing: [stage, from, to] in microseconds.
function segments(t) {
  const out = [];
  const push = (stage, a, b) => { if (a !== undefined && b !== undefined && b >= a) out.push([stage, a, b]); };
  const start = t.recorded !== undefined ? t.recorded : t.prepare;
  push("waiting", start, t.prepare);
  const prepEnd = t.dispatch !== undefined ? t.dispatch : t.finalize;
  if (t.approval) {
    push("prepare", t.prepare, t.approval[0]);
    push("approval", t.approval[0], t.approval[1]);
    push("prepare", t.approval[1], prepEnd);
  } else {
    push("prepare", t.prepare, prepEnd);
  }
  push("dispatch", t.dispatch, t.dispatched);
  push("waiting", t.dispatched, t.finalize);
  push("post-execute", t.finalize, t.done);
  return out;
}

function fmtUs(us) {
  if (us >= 1e6) return (us / 1e6).toFixed(2) + " s";
  if (us >= 1e3) return (us / 1e3).toFixed(1) + " ms";
  return Math.round(us) + " µs";
}

function callDuration(c) {
  const t = c.timing;
  if (!t || t.done === undefined) return null;
  const start = t.recorded !== undefined ? t.recorded : t.prepare;
  return start === undefined ? null : t.done - start;
}

function waterfall(step, onPick) {
  const box = el("div", "waterfall");
  const calls = step.calls;
  const timed = calls.length > 0 && calls.every(c => c.timing && c.timing.done !== undefined);
  const startOf = t => (t.recorded !== undefined ? t.recorded : (t.prepare || 0));
  // Time 0 is the first call's start (the step's clock also counts logging its calls).
  const origin = timed ? Math.min(...calls.map(c => startOf(c.timing))) : 0;
  const span = timed ? Math.max(1, ...calls.map(c => c.timing.done - origin)) : calls.length;
  // One lane: a bar for call `c` from `from` to `to` (in units of `span`).
  const lane = (c, from, to, sub) => {
    const l = el("div", "lane" + (sub ? " sub" : ""));
    const bar = el("div", "bar" + (sub ? " sub" : "") + (c.result && c.result.isError ? " failed" : "") +
      (timed ? "" : " untimed"));
    bar.dataset.callId = c.id;
    if (timed) {
      for (const [stage, a, b] of segments(c.timing)) {
        const seg = el("div", "seg " + stage);
        seg.style.width = (100 * (b - a) / Math.max(1, to - from)) + "%";
        seg.title = stage + " " + fmtUs(b - a);
        bar.appendChild(seg);
      }
      bar.title = c.name + " " + fmtUs(to - from);
    } else {
      bar.title = c.name + " (no timing in this log)";
    }
    bar.style.left = (100 * from / span) + "%";
    bar.style.width = (100 * (to - from) / span) + "%";
    bar.addEventListener("click", ev => { ev.stopPropagation(); onPick(c.id); });
    l.appendChild(bar);
    box.appendChild(l);
  };
  calls.forEach((c, i) => {
    if (!timed) return lane(c, i, i + 1, false);
    lane(c, startOf(c.timing) - origin, c.timing.done - origin, false);
    for (const s of c.subs) {
      const t = s.timing;
      if (t && t.done !== undefined) lane(s, startOf(t) - origin, t.done - origin, true);
    }
  });
  const axis = el("div", "axis", timed ? fmtUs(span) : "no timing in this log: calls in model order");
  box.appendChild(axis);
  return box;
}

function legend() {
  const box = el("div", "legend");
  for (const s of STAGES) {
    const item = el("span");
    const sw = el("i"); sw.style.background = "var(--" + (s === "post-execute" ? "post" : s) + ")";
    item.appendChild(sw); item.appendChild(document.createTextNode(s));
    box.appendChild(item);
  }
  return box;
}
