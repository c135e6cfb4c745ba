// dsh view: builds turns -> steps -> calls from a session's events, one event at a time, so
// a running session is followed by applying the events appended since the last look.
"use strict";

function newModel() {
  return { turns: [], steps: new Map(), calls: new Map(), approvals: new Map(),
           pending: [], next: 0, offset: 0, count: 0, tools: new Set(), codes: new Set() };
}

function stepOf(m, turn, step) {
  turn = turn || (m.turns.length ? m.turns[m.turns.length - 1].n : 1);
  let t = m.turns.find(x => x.n === turn);
  if (!t) { t = { n: turn, steps: [], end: null }; m.turns.push(t); }
  step = step || (t.steps.length ? t.steps[t.steps.length - 1].n : 1);
  const key = turn + ":" + step;
  let s = m.steps.get(key);
  if (!s) {
    s = { turn, n: step, key, text: "", calls: [], timing: null };
    m.steps.set(key, s); t.steps.push(s);
  }
  return s;
}

function newCall(id, name, args, seq, s) {
  return { id, name, args, seq, turn: s.turn, step: s.n, recorded: true,
           result: null, approvals: [], hooks: [], subs: [], timing: null };
}

// The text of content blocks (a string, or blocks with `text`).
function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map(b => (b && typeof b.text === "string") ? b.text : "").join("");
}

// The call a hook event belongs to when it names none (the reference harness's do not): the
// oldest call without a result (prepare and finalize run one call at a time, in model order).
function hookTarget(m) { return m.pending.length ? m.calls.get(m.pending[0]) : null; }

function applyEvent(m, seq, ev) {
  const d = ev.data || {};
  m.count += 1;
  switch (ev.type) {
    case "turn/start":
      if (!m.turns.some(x => x.n === d.turn)) m.turns.push({ n: d.turn, steps: [], end: null });
      break;
    case "turn/end": { const t = m.turns.find(x => x.n === d.turn); if (t) t.end = d.reason || {}; break; }
    case "step/start": stepOf(m, d.turn, d.step); break;
    case "assistant/message": {
      const s = stepOf(m, d.turn, d.step);
      const content = (d.message || {}).content;
      s.text = textOf(content);
      // The calls the model made, in its order: each is shown from here on, and is `recorded`
      // once its tool/call is logged (a call never recorded never ran).
      for (const b of Array.isArray(content) ? content : []) {
        if (!b || b.type !== "tool-call" || typeof b.id !== "string" || m.calls.has(b.id)) continue;
        const args = typeof b.arguments === "string" ? b.arguments : JSON.stringify(b.arguments);
        const c = newCall(b.id, b.name, args, null, s);
        c.recorded = false;
        m.calls.set(c.id, c); s.calls.push(c); m.tools.add(c.name);
      }
      break;
    }
    case "tool/call": {
      const s = stepOf(m, d.turn, d.step);
      const made = m.calls.get(d.callId);
      if (made && made.recorded === false) {
        Object.assign(made, { recorded: true, name: d.name, args: d.arguments, seq });
        m.pending.push(made.id); m.tools.add(made.name);
        break;
      }
      const c = newCall(d.callId, d.name, d.arguments, seq, s);
      m.calls.set(c.id, c); s.calls.push(c); m.pending.push(c.id); m.tools.add(c.name);
      break;
    }
    case "tool/result": {
      const msg = d.message || {};
      const id = (msg.source && msg.source.callId) || d.callId;
      const block = (Array.isArray(msg.content) ? msg.content : [])
        .find(b => b && b.type === "tool-result") || d;
      const c = m.calls.get(id);
      if (!c) break;
      const err = d.error || null;
      c.result = { text: textOf(block.content), isError: !!block.isError,
                   code: err && err.code ? err.code : null, errorName: err && err.name,
                   meta: d.meta || null };
      if (c.result.code) m.codes.add(c.result.code);
      m.pending = m.pending.filter(x => x !== id);
      break;
    }
    case "tool/code-dispatch-start":
    case "tool/code-dispatch": {
      const parent = m.calls.get(d.parentCallId) || m.calls.get(d.rootCallId);
      if (!parent) break;
      let sub = parent.subs.find(x => x.id === d.subCallId);
      if (!sub) {
        sub = { id: d.subCallId, name: d.name, args: JSON.stringify(d.arguments), result: null,
                approvals: [], hooks: [], subs: [], sub: true };
        parent.subs.push(sub); m.tools.add(d.name);
      }
      if (ev.type === "tool/code-dispatch") {
        const err = d.error || null;
        sub.result = { text: textOf(d.content), isError: !!d.isError,
                       code: err && err.code ? err.code : null, meta: d.meta || null };
        if (sub.result.code) m.codes.add(sub.result.code);
      }
      break;
    }
    case "approval/asked": {
      const c = m.calls.get(d.callId);
      const a = { reason: d.reason || "", outcome: "asked", tool: d.toolName };
      if (c) c.approvals.push(a);
      if (d.id) m.approvals.set(d.id, a);
      break;
    }
    case "approval/decided": {
      const a = m.approvals.get(d.id);
      if (a) a.outcome = d.outcome || JSON.stringify(d);
      break;
    }
    case "hook/invoked": case "hook/result": {
      const c = (d.callId && m.calls.get(d.callId)) || hookTarget(m);
      if (!c) break;
      if (ev.type === "hook/invoked") c.hooks.push({ point: d.point, handler: d.handlerId, matcher: d.matcher });
      else {
        const h = c.hooks.find(x => x.handler === d.handlerId && !x.done) || {};
        Object.assign(h, { point: d.point, handler: d.handlerId, done: true, decision: d.decision,
                           exitCode: d.exitCode, durationMs: d.durationMs, stderr: d.stderrSummary });
        if (!c.hooks.includes(h)) c.hooks.push(h);
      }
      break;
    }
    case "dsh/step-timing": {
      const s = stepOf(m, d.turn, d.step);
      s.timing = { startedAt: d.startedAt };
      for (const t of d.calls || []) {
        const c = m.calls.get(t.callId);
        if (!c) continue;
        c.timing = t;
        // Code Mode's sub-calls, on the same clock.
        for (const st of t.subs || []) { const sub = c.subs.find(x => x.id === st.callId); if (sub) sub.timing = st; }
      }
      break;
    }
    default: break;
  }
}

// Whether a call (or one of its sub-calls) passes the filters.
function callMatches(c, f) {
  const self = (!f.tool || c.name === f.tool) &&
    (!f.code || (f.code === "*" ? !!(c.result && c.result.isError)
                                : !!(c.result && c.result.code === f.code)));
  return self || c.subs.some(s => callMatches(s, f));
}

// The calls the model made that have no result: `unrecorded` ones never logged (they never
// ran), `unanswered` ones logged without a result (what `dsh check` reports and `dsh repair`
// answers; Code Mode's sub-calls are not the model's, so not counted).
function openCalls(m) {
  const out = { unanswered: [], unrecorded: [] };
  for (const c of m.calls.values()) {
    if (!c.result) (c.recorded === false ? out.unrecorded : out.unanswered).push(c);
  }
  return out;
}
