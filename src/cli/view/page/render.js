// dsh view: the session panel: filters, turns, steps (text, waterfall, calls) and a call's
// detail (arguments, result, error code, approvals, hooks, rendered diffs, Code Mode sub-calls).
// Everything from the log goes in through textContent, never as markup.
"use strict";

function pretty(raw) {
  try { return JSON.stringify(JSON.parse(raw), null, 2); } catch (_) { return String(raw); }
}

function argSummary(raw) {
  let v; try { v = JSON.parse(raw); } catch (_) { return String(raw); }
  if (v && typeof v === "object") {
    for (const k of ["description", "command", "file_path", "path", "pattern", "ms", "text"]) {
      if (v[k] !== undefined) return String(v[k]);
    }
  }
  return JSON.stringify(v);
}

// A line diff (longest common subsequence; the texts of one edit are small).
function lineDiff(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  if (x.length * y.length > 250000) return [...x.map(l => ["del", l]), ...y.map(l => ["add", l])];
  const L = Array.from({ length: x.length + 1 }, () => new Array(y.length + 1).fill(0));
  for (let i = x.length - 1; i >= 0; i--)
    for (let j = y.length - 1; j >= 0; j--)
      L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = []; let i = 0, j = 0;
  while (i < x.length && j < y.length) {
    if (x[i] === y[j]) { out.push(["ctx", x[i]]); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push(["del", x[i++]]);
    else out.push(["add", y[j++]]);
  }
  while (i < x.length) out.push(["del", x[i++]]);
  while (j < y.length) out.push(["add", y[j++]]);
  return out;
}

function section(box, title, body) {
  box.appendChild(el("h4", null, title));
  box.appendChild(body);
}

// What a call without a result is: still running (the session is written), or left without
// one by a session that stopped (a call the model made that was never recorded never ran).
function missing(c, ctx) {
  if (ctx.live) return { mark: "…", cls: "", text: "no result yet" };
  const repair = ctx.repair ? "`" + ctx.repair + "`" : "`dsh repair`";
  if (c.recorded === false) {
    return { mark: "?", cls: "unrecorded",
             text: "never recorded: the model made this call, but the session stopped before it " +
                   "was logged, so it never ran; " + repair + " records it with an INTERRUPTED result" };
  }
  if (c.sub) {
    return { mark: "∅", cls: "stopped",
             text: "no result: the session stopped before this sub-call finished" };
  }
  return { mark: "∅", cls: "stopped",
           text: "no result: the session stopped before this call was answered (it may have run); " +
                 repair + " answers it with an INTERRUPTED result" };
}

function detail(c, ctx) {
  const box = el("div", "detail");
  box.dataset.callId = c.id;
  section(box, "arguments", el("pre", "args", pretty(c.args)));
  if (c.result) {
    const head = c.result.isError ? "result (error" + (c.result.code ? " " + c.result.code : "") + ")" : "result";
    section(box, head, el("pre", "result", c.result.text));
  } else {
    const m = missing(c, ctx);
    section(box, "result", el("p", "muted result " + m.cls, m.text));
  }
  if (c.timing && c.timing.done !== undefined) {
    const parts = segments(c.timing).map(([s, a, b]) => s + " " + fmtUs(b - a));
    section(box, "timing", el("pre", "timing", parts.join("\n")));
  }
  if (c.approvals.length) {
    section(box, "approval", el("pre", "approval",
      c.approvals.map(a => a.outcome + (a.reason ? ": " + a.reason : "")).join("\n")));
  }
  if (c.hooks.length) {
    section(box, "hooks", el("pre", "hooks", c.hooks.map(h =>
      (h.point || "hook") + " " + (h.handler || "") + (h.matcher ? " [" + h.matcher + "]" : "") +
      (h.decision ? " → " + h.decision : "") + (h.exitCode !== undefined ? " (exit " + h.exitCode + ")" : "") +
      (h.stderr ? ": " + h.stderr : "")).join("\n")));
  }
  const diffs = c.result && c.result.meta && Array.isArray(c.result.meta.diffs) ? c.result.meta.diffs : [];
  for (const d of diffs) {
    const pre = el("pre", "diff");
    for (const [kind, line] of lineDiff(d.oldText || "", d.newText || "")) {
      const span = el("div", kind, (kind === "add" ? "+ " : kind === "del" ? "- " : "  ") + line);
      pre.appendChild(span);
    }
    section(box, "diff " + (d.path || ""), pre);
  }
  return box;
}

function callRow(c, state, filters, ctx) {
  const wrap = el("div", "call-wrap");
  if (!callMatches(c, filters)) wrap.classList.add("hidden");
  const row = el("div", "call" + (state.open.has(c.id) ? " open" : ""));
  row.dataset.callId = c.id;
  const failed = c.result && c.result.isError;
  if (c.result) {
    row.appendChild(el("span", "st " + (failed ? "err" : "ok"), failed ? "✗" : "✓"));
  } else {
    const m = missing(c, ctx);
    const st = el("span", "st " + m.cls, m.mark);
    st.title = m.text;
    row.appendChild(st);
  }
  row.appendChild(el("span", "name", c.name));
  row.appendChild(el("span", "args", argSummary(c.args)));
  const dur = callDuration(c);
  const tail = el("span", "code", (c.result && c.result.code) || "");
  if (dur !== null) tail.appendChild(el("span", "muted", " " + fmtUs(dur)));
  row.appendChild(tail);
  row.addEventListener("click", () => state.toggle(c.id));
  wrap.appendChild(row);
  if (state.open.has(c.id)) wrap.appendChild(detail(c, ctx));
  if (c.subs.length) {
    const subs = el("div", "subs");
    for (const s of c.subs) subs.appendChild(callRow(s, state, filters, ctx));
    wrap.appendChild(subs);
  }
  return wrap;
}

function select(label, id, options, value, onChange) {
  const l = el("label", null, label + " ");
  const s = el("select"); s.id = id;
  for (const [v, text] of options) { const o = el("option", null, text); o.value = v; s.appendChild(o); }
  s.value = value;
  s.addEventListener("change", () => onChange(s.value));
  l.appendChild(s);
  return l;
}

function renderSession(root, info, m, state) {
  root.replaceChildren();
  const head = el("div");
  const hid = info.header && typeof info.header.id === "string" ? info.header.id : info.id;
  head.appendChild(el("h2", null, "session " + hid));
  const meta = el("p", "muted", info.path + " · " + m.count + " events · " + m.calls.size + " calls ");
  if (info.live) meta.appendChild(el("span", "badge live", "live"));
  else if (state.wasLive) meta.appendChild(el("span", "badge ended", "no longer being written"));
  head.appendChild(meta);
  // A session no process writes any more, with calls the model made left without a result:
  // what `dsh check` reports, and what answers them.
  const open = openCalls(m);
  const left = open.unanswered.length + open.unrecorded.length;
  if (!info.live && left > 0) {
    const repair = info.repair ? "`" + info.repair + "`" : "`dsh repair`";
    const parts = [];
    if (open.unanswered.length) parts.push(open.unanswered.length + " call(s) without a result");
    if (open.unrecorded.length) parts.push(open.unrecorded.length + " call(s) the model made that were never recorded (they never ran)");
    head.appendChild(el("p", "stopped-note",
      "Not being written: the session stopped with " + parts.join(" and ") +
      "; they will never be answered. " + repair + " answers them with INTERRUPTED results."));
  }
  root.appendChild(head);
  const ctx = { live: !!info.live, repair: info.repair || null };
  const f = state.filters;
  const filters = el("div", "filters");
  filters.appendChild(select("tool", "filter-tool", [["", "all"], ...[...m.tools].sort().map(t => [t, t])],
    f.tool, v => { f.tool = v; state.redraw(); }));
  filters.appendChild(select("failure", "filter-code",
    [["", "all calls"], ["*", "any failure"], ...[...m.codes].sort().map(c => [c, c])],
    f.code, v => { f.code = v; state.redraw(); }));
  filters.appendChild(legend());
  root.appendChild(filters);
  const filtering = !!(f.tool || f.code);
  for (const t of m.turns) {
    const turn = el("section", "turn");
    turn.appendChild(el("h2", null, "turn " + t.n + (t.end && t.end.kind ? " · " + t.end.kind : "")));
    for (const s of t.steps) {
      const step = el("div", "step");
      step.dataset.turn = s.turn; step.dataset.step = s.n;
      if (filtering && !s.calls.some(c => callMatches(c, f))) step.classList.add("hidden");
      step.appendChild(el("h3", null, "step " + s.n + (s.timing ? " · " + new Date(s.timing.startedAt).toLocaleTimeString() : "")));
      if (s.text) step.appendChild(el("div", "text", s.text));
      if (s.calls.length) {
        step.appendChild(waterfall(s, id => state.toggle(id)));
        for (const c of s.calls) step.appendChild(callRow(c, state, f, ctx));
      }
      turn.appendChild(step);
    }
    root.appendChild(turn);
  }
}
