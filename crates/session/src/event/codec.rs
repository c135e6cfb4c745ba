//! The line codec of [`Event`]: one compact JSON line out, one line (or parsed value) in, with
//! a line in a non-canonical layout kept verbatim so it is written back as read.

use super::*;

impl Event {
    /// The event as one compact JSON line (without the newline).
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::new();
        self.write_line(&mut out);
        out.pop();
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the event's JSON text and a newline to `out`.
    pub(crate) fn write_line(&self, out: &mut Vec<u8>) {
        if self.tail.verbatim().is_none()
            && let Some(text) = self.data.text_or_written()
        {
            self.write_spliced(&text, out);
            out.push(b'\n');
            return;
        }
        // Serializing into a Vec cannot fail for these types (string keys, finite numbers).
        let depth = self.data.depth() + 2;
        let written = deep::with_stack(depth, || serde_json::to_writer(&mut *out, self));
        if written.is_err() {
            out.extend_from_slice(b"null");
        }
        out.push(b'\n');
    }

    /// Writes `{type, data, sourceEventSeqs?, surfaceOp?}` with `data` copied from its text:
    /// the same bytes serializing the tree would give.
    fn write_spliced(&self, text: &str, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(text.len() + self.event_type.len() + 64);
        out.extend_from_slice(b"{\"type\":");
        let mut ok = serde_json::to_writer(&mut *out, &*self.event_type).is_ok();
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(text.as_bytes());
        if let Some(seqs) = self.source_event_seqs() {
            out.extend_from_slice(b",\"sourceEventSeqs\":");
            ok &= serde_json::to_writer(&mut *out, seqs).is_ok();
        }
        if let Some(op) = self.tail.surface_op() {
            out.extend_from_slice(b",\"surfaceOp\":");
            ok &= serde_json::to_writer(&mut *out, op).is_ok();
        }
        out.push(b'}');
        if !ok {
            out.truncate(start);
            out.extend_from_slice(b"null");
        }
    }

    /// Reads one event from a parsed line value. Unknown types are kept verbatim; a line whose
    /// top-level keys are not `type, data, sourceEventSeqs?, surfaceOp?` in that order keeps its
    /// whole value for writing back.
    ///
    /// Must run on a stack sized for the value (see [`deep::parse_with`]).
    pub(crate) fn from_value(value: Value) -> Result<Event, String> {
        let verbatim = match value.as_object() {
            Some(map) if is_canonical_layout(map) => None,
            Some(_) => Some(value.clone()),
            None => return Err("an event line must be a JSON object".to_owned()),
        };
        let Value::Object(mut map) = value else {
            return Err("an event line must be a JSON object".to_owned());
        };
        let event_type = match map.get("type") {
            Some(Value::String(t)) => type_arc(t),
            Some(_) => return Err("event `type` must be a string".to_owned()),
            None => return Err("event has no `type`".to_owned()),
        };
        let Some(data) = map.shift_remove("data") else {
            return Err(format!("{event_type} event has no `data`"));
        };
        let source_event_seqs = match map.shift_remove("sourceEventSeqs") {
            None => None,
            Some(Value::Array(items)) => {
                let mut seqs = Vec::with_capacity(items.len());
                for item in &items {
                    match item.as_u64() {
                        Some(s) => seqs.push(s),
                        None => {
                            return Err(
                                "`sourceEventSeqs` must hold non-negative integers".to_owned()
                            );
                        }
                    }
                }
                Some(Seqs::from(seqs))
            }
            Some(_) => return Err("`sourceEventSeqs` must be an array".to_owned()),
        };
        let surface_op = map.shift_remove("surfaceOp").map(SurfaceOp::from_value);
        let span = if event_type.ends_with(types::CHUNKS_SUFFIX) {
            chunk_span(&event_type, &data)?
        } else {
            1
        };
        let data = Json::new(data).map_err(|e| e.to_string())?;
        let verbatim = verbatim.map(Json::from_shallow);
        Ok(Event {
            event_type,
            data: Payload::from_json(data),
            source_event_seqs,
            tail: Tail::new(surface_op, span, verbatim),
        })
    }

    /// Parses one event from its JSON line.
    pub fn from_json_line(line: &str) -> Result<Event, crate::error::LineError> {
        Event::read_line(line, &mut Scratch::default()).map_err(crate::error::LineError)
    }

    /// [`Event::from_json_line`] with the scan's buffers reused across lines. A line in the
    /// canonical form keeps its `data` as text (the tree is built on first use, like a typed
    /// event's); any other line is parsed into a tree and read from it.
    pub(crate) fn read_line(line: &str, scratch: &mut Scratch) -> Result<Event, String> {
        if let Some(event) = scan_line(line, scratch).and_then(Event::from_scanned) {
            return Ok(event);
        }
        deep::parse_with(line, Event::from_value)
    }

    /// The event of a line the scan accepted: the same one [`Event::from_value`] reads from
    /// its tree (`None` only if the surface operation does not parse, which the scan rules out).
    fn from_scanned(line: Scanned<'_>) -> Option<Event> {
        let surface_op = match line.surface_op {
            None => None,
            Some("\"append\"") => Some(SurfaceOp::Append),
            Some(text) => Some(SurfaceOp::Other(Json::parse(text).ok()?)),
        };
        Some(Event {
            event_type: type_arc(line.event_type),
            data: Payload::from_text_at_depth(Box::from(line.data), line.data_depth, line.facts),
            source_event_seqs: line.source_event_seqs.map(Seqs::from),
            tail: Tail::new(surface_op, 1, None),
        })
    }
}

fn is_canonical_layout(map: &Map<String, Value>) -> bool {
    let mut keys = map.keys().map(String::as_str);
    if keys.next() != Some("type") || keys.next() != Some("data") {
        return false;
    }
    let mut rest: Vec<&str> = keys.collect();
    if rest.first() == Some(&"sourceEventSeqs") {
        rest.remove(0);
    }
    if rest.first() == Some(&"surfaceOp") {
        rest.remove(0);
    }
    rest.is_empty()
}
