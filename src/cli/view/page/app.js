// dsh view: the session list, the selected session's events followed live (the server's event
// stream, or asking for the events appended since when there is none), and the page state kept
// across redraws.
"use strict";

const POLL_MS = 1000;
// How often a stored session whose writer is gone is looked at again (a `dsh repair`, or a
// process resuming it, writes to it again).
const RECHECK_MS = 3000;
const state = { id: null, info: null, model: null, open: new Set(), filters: { tool: "", code: "" },
                timer: null, stream: null, toggle: null, redraw: null, wasLive: false };

async function getJson(url) {
  const r = await fetch(url, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function redraw() {
  if (!state.model) return;
  renderSession(document.getElementById("session"), state.info, state.model, state);
  document.body.dataset.events = String(state.model.count);
}
state.redraw = redraw;
state.toggle = id => { if (state.open.has(id)) state.open.delete(id); else state.open.add(id); redraw(); };

// One answer of api/events (or one message of the stream): its events applied to the model.
function apply(id, r) {
  if (id !== state.id) return;
  // A log that shrank (repaired) comes whole again: start over.
  if (!state.model || r.reset) state.model = newModel();
  const changed = r.events.length > 0 || r.reset || !state.info || state.info.live !== r.live;
  for (const { seq, event } of r.events) applyEvent(state.model, seq, event);
  state.model.next = r.next;
  state.model.offset = r.offset;
  // The header comes with the first answer only (later ones read just the appended lines).
  const header = r.header || (state.info && state.info.header) || null;
  state.info = { id: r.id, path: r.path, live: r.live, header, repair: r.repair || null };
  if (r.live) state.wasLive = true;
  document.body.dataset.live = String(!!r.live);
  if (changed) redraw();
}

function showError(id, message) {
  const main = document.getElementById("session");
  main.replaceChildren(el("p", "error", "cannot read session " + id + ": " + message));
}

function eventsQuery(id) {
  const m = state.model;
  return "id=" + encodeURIComponent(id) + "&after=" + (m ? m.next : 0) + "&offset=" + (m ? m.offset : 0);
}

// Followed live by the server's event stream; asking again every second when the browser has
// no EventSource or the stream cannot be opened.
function follow() {
  const id = state.id;
  if (!window.EventSource) return poll();
  const es = new EventSource("api/stream?" + eventsQuery(id));
  state.stream = es;
  document.body.dataset.follow = "sse";
  es.onmessage = e => apply(id, JSON.parse(e.data));
  // The writer is gone (a stored session): the stream ends. The page says the session is no
  // longer written (and what answers the calls it left), and looks again now and then.
  es.addEventListener("end", () => {
    es.close();
    if (state.stream !== es || id !== state.id) return;
    state.stream = null;
    document.body.dataset.follow = "ended";
    state.timer = setTimeout(recheck, RECHECK_MS);
  });
  es.addEventListener("problem", e => { es.close(); if (id === state.id) showError(id, e.data); });
  es.onerror = () => {
    // A dropped connection is retried by the browser (from the last message's id); a stream
    // refused outright is followed by asking instead.
    if (es.readyState === EventSource.CLOSED && id === state.id && state.stream === es) {
      state.stream = null;
      poll();
    }
  };
}

// A stored session whose stream ended: asked for what was written since (a repair's results);
// followed live again once a process writes it.
async function recheck() {
  const id = state.id;
  try {
    const r = await getJson("api/events?" + eventsQuery(id));
    apply(id, r);
    if (r.live && id === state.id) return follow();
  } catch (e) {
    if (id === state.id) showError(id, e.message);
  }
  if (id === state.id) state.timer = setTimeout(recheck, RECHECK_MS);
}

async function poll() {
  const id = state.id;
  document.body.dataset.follow = "poll";
  try {
    apply(id, await getJson("api/events?" + eventsQuery(id)));
  } catch (e) {
    if (id === state.id) showError(id, e.message);
  }
  if (id === state.id) state.timer = setTimeout(poll, POLL_MS);
}

function choose(id) {
  clearTimeout(state.timer);
  if (state.stream) { state.stream.close(); state.stream = null; }
  Object.assign(state, { id, info: null, model: null, open: new Set(), filters: { tool: "", code: "" },
                         wasLive: false });
  document.querySelectorAll(".session").forEach(e => e.classList.toggle("selected", e.dataset.id === id));
  history.replaceState(null, "", "#" + encodeURIComponent(id));
  follow();
}

async function loadSessions() {
  const nav = document.getElementById("sessions");
  let list;
  try { list = await getJson("api/sessions"); }
  catch (e) { nav.replaceChildren(el("p", "error", e.message)); return; }
  nav.replaceChildren();
  if (!list.length) nav.appendChild(el("p", "muted", "no sessions here yet"));
  for (const s of list) {
    const item = el("div", "session" + (s.id === state.id ? " selected" : ""));
    item.dataset.id = s.id;
    // A stored session's list entry has no prompt (its rows are not read to list it).
    item.appendChild(el("div", "prompt", s.prompt || (s.live === undefined ? "(no prompt)" : "session " + s.id)));
    item.appendChild(el("div", "sid", s.id + " · " + new Date(s.modified).toLocaleString() +
      (s.live ? " · live" : "")));
    item.title = s.path;
    item.addEventListener("click", () => choose(s.id));
    nav.appendChild(item);
  }
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (!state.id && list.length) choose(list.some(s => s.id === wanted) ? wanted : list[0].id);
}

loadSessions();
setInterval(loadSessions, 5000);
