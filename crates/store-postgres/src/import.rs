//! Loading a JSON Lines log into the store, losslessly.

use crate::error::StoreError;
use crate::store::PgStore;

/// What an import did.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The session id (from the log's header).
    pub id: String,
    /// How many event lines were stored.
    pub lines: usize,
}

/// Rows per `INSERT` of an import.
const BATCH: usize = 1000;

fn db(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Db { context, source }
}

impl PgStore {
    /// Imports a log file's bytes as a new session (its id from the header), in one
    /// transaction. Every line is stored verbatim, so [`PgStore::export`] gives the same bytes
    /// back. Refused (nothing stored): a log that does not read strictly (the error names its
    /// line), a blank line or a last line without its newline (neither could be given back
    /// byte for byte), a session id already in the store, or one that is empty, holds a
    /// control character or is longer than [`crate::MAX_ID_BYTES`] ([`StoreError::BadId`]). Pairing problems are kept as they are
    /// (`dsh check` names them; opening the session repairs them).
    pub async fn import(&self, bytes: &[u8]) -> Result<Imported, StoreError> {
        self.import_as(bytes, None).await
    }

    /// [`PgStore::import`] under session id `id` instead of the header's (the header line is
    /// still kept verbatim, so the export is the same bytes).
    pub async fn import_as(&self, bytes: &[u8], id: Option<&str>) -> Result<Imported, StoreError> {
        if let Some(id) = id {
            crate::error::check_id(id)?;
        }
        // A log that does not read is named by the id it was to be stored under: the one
        // given, else its header's when that line reads.
        let named = id.map(str::to_owned).or_else(|| {
            let first = bytes.split(|&b| b == b'\n').next()?;
            let header = dsh_session::Header::from_json_line(std::str::from_utf8(first).ok()?);
            header.ok().map(|h| h.id().to_owned())
        });
        let unnamed = |e| StoreError::Session {
            session: named.clone().unwrap_or_else(|| "(import)".to_owned()),
            source: e,
        };
        let log = dsh_session::read_log(bytes).map_err(unnamed)?;
        let Some(header) = &log.header else {
            return Err(unnamed(dsh_session::SessionError::Corrupt {
                line: 1,
                message: "the file holds no session header".to_owned(),
            }));
        };
        let id = id.unwrap_or(header.id()).to_owned();
        crate::error::check_id(&id)?;
        let text = std::str::from_utf8(bytes).map_err(|_| StoreError::Session {
            session: id.clone(),
            source: dsh_session::SessionError::Corrupt {
                line: 1,
                message: "not valid UTF-8".to_owned(),
            },
        })?;
        if !text.ends_with('\n') {
            return Err(StoreError::Session {
                session: id,
                source: dsh_session::SessionError::Corrupt {
                    line: text.lines().count(),
                    message: "the last line has no newline (repair the file first)".to_owned(),
                },
            });
        }
        let mut lines = text.split_terminator('\n');
        let header_line = lines.next().unwrap_or_default();
        let mut seqs = Vec::with_capacity(log.events.len());
        let mut rows = Vec::with_capacity(log.events.len());
        for (i, line) in lines.enumerate() {
            if line.trim().is_empty() {
                return Err(StoreError::Session {
                    session: id,
                    source: dsh_session::SessionError::Corrupt {
                        line: i + 2,
                        message:
                            "a blank line, which the store cannot keep (one row per event, and \
                                  an export gives back the log it imported byte for byte): \
                                  remove the blank lines (`dsh check` reads past them), then \
                                  import again"
                                .to_owned(),
                    },
                });
            }
            rows.push(line);
        }
        for (seq, _) in &log.events {
            seqs.push(i64::try_from(*seq).unwrap_or(i64::MAX));
        }
        let next_seq = i64::try_from(log.next_seq()).unwrap_or(i64::MAX);
        let mut pooled = self.pooled().await?;
        let tx = pooled
            .get()?
            .transaction()
            .await
            .map_err(db("begin the import"))?;
        let made = tx
            .execute(
                "INSERT INTO dsh_sessions (id, header, next_seq) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO NOTHING",
                &[&id, &header_line, &next_seq],
            )
            .await
            .map_err(db("create the session"))?;
        if made == 0 {
            return Err(StoreError::Exists(id));
        }
        for (seq_chunk, row_chunk) in seqs.chunks(BATCH).zip(rows.chunks(BATCH)) {
            tx.execute(
                "INSERT INTO dsh_events (session_id, seq, line)
                 SELECT $1, u.seq, u.line FROM unnest($2::bigint[], $3::text[]) AS u(seq, line)",
                &[&id, &seq_chunk, &row_chunk],
            )
            .await
            .map_err(db("store the events"))?;
        }
        tx.commit().await.map_err(db("commit the import"))?;
        Ok(Imported {
            id,
            lines: rows.len(),
        })
    }
}
