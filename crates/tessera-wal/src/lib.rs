//! tessera-wal: a node's write-ahead log.
//!
//! The log is the engine's; what goes in it is the protocol's business
//! (DESIGN §3). A node asks for a record to be durable with
//! `Effect::Persist { token, record }`; the runtime appends it here and calls
//! the node's `on_persisted(token)` only after the record's group is on disk.
//! After a crash, [`recover`] hands the records back, in order, as
//! `Restart::recovered`.
//!
//! # Files
//! A log directory holds generations: `checkpoint-N` (one snapshot record)
//! and `log-N` (records appended after that snapshot). Generation 0 has no
//! checkpoint. Every record on disk is framed as
//! `len: u32 LE | crc32(payload): u32 LE | payload`, so recovery detects a
//! torn or corrupted record and stops there: the tail after the last valid
//! record of the newest log is cut off (a crash mid-append leaves exactly
//! such a tail), and appends continue after the last valid record.
//!
//! # Group commit
//! One writer thread takes records from a channel, writes them, and when
//! the first record of a group has waited [`WalConfig::group_window`] (or
//! the group reached [`WalConfig::group_bytes`]) calls `fdatasync` once for
//! the whole group, then reports the group's tokens (Rococo §5.7 batches
//! its log this way with a 1 ms window). With `fsync` off, records are
//! reported once written to the OS: they survive a killed process, not a
//! lost machine.
//!
//! # Checkpoints
//! [`Wal::checkpoint`] takes a snapshot (the node's whole durable state, as
//! the node encodes it) and queues it behind the records already appended:
//! the writer syncs those, opens `log-(N+1)`, writes and syncs
//! `checkpoint-(N+1)` (through a temporary file and a rename), then deletes
//! generation N. A crash at any point leaves either generation N complete
//! (its checkpoint, its log, and `log-(N+1)` if it exists) or generation
//! N+1 complete; [`recover`] picks the newest complete checkpoint and
//! replays every log from its generation on.

use bytes::Bytes;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Largest record accepted (a checkpoint of a big store included).
pub const MAX_RECORD: usize = 1 << 30;
const HEADER: usize = 8;

#[derive(Debug, Error)]
pub enum WalError {
    #[error("log directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the log writer thread is gone")]
    Closed,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How the log behaves.
#[derive(Clone, Debug)]
pub struct WalConfig {
    pub dir: PathBuf,
    /// `fdatasync` each group (else records are durable against a process
    /// crash only).
    pub fsync: bool,
    /// How long the first record of a group waits for others.
    pub group_window: Duration,
    /// A group this large is flushed at once.
    pub group_bytes: usize,
}

impl WalConfig {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        WalConfig {
            dir: dir.into(),
            fsync: true,
            group_window: Duration::from_millis(1),
            group_bytes: 1 << 20,
        }
    }
}

/// What recovery found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The checkpoint's snapshot (if any) first, then the log records after
    /// it, in append order.
    pub records: Vec<Bytes>,
    /// The generation appends continue in.
    pub generation: u64,
    /// Bytes of a torn or corrupt tail that were cut off.
    pub truncated: u64,
    /// Bytes in the current log (for checkpoint policies).
    pub log_bytes: u64,
}

fn frame(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Parse framed records from `data`; returns them and the length of the
/// valid prefix (the rest is a torn or corrupt tail).
pub fn parse_records(data: &[u8]) -> (Vec<Bytes>, usize) {
    let mut recs = Vec::new();
    let mut at = 0;
    while data.len() - at >= HEADER {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().expect("4")) as usize;
        let crc = u32::from_le_bytes(data[at + 4..at + 8].try_into().expect("4"));
        if len > MAX_RECORD || data.len() - at - HEADER < len {
            break;
        }
        let payload = &data[at + HEADER..at + HEADER + len];
        if crc32fast::hash(payload) != crc {
            break;
        }
        recs.push(Bytes::copy_from_slice(payload));
        at += HEADER + len;
    }
    (recs, at)
}

fn gen_of(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.parse().ok()
}

fn log_path(dir: &Path, g: u64) -> PathBuf {
    dir.join(format!("log-{g}"))
}

fn checkpoint_path(dir: &Path, g: u64) -> PathBuf {
    dir.join(format!("checkpoint-{g}"))
}

fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Read the log directory (creating it if missing): the newest complete
/// checkpoint, then every log from its generation on. A torn tail of the
/// newest log is cut off on disk.
pub fn recover(dir: &Path) -> Result<Recovered, WalError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut checkpoints = Vec::new();
    let mut logs = Vec::new();
    for e in fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(g) = gen_of(&name, "checkpoint-") {
            checkpoints.push(g);
        } else if let Some(g) = gen_of(&name, "log-") {
            logs.push(g);
        }
    }
    checkpoints.sort_unstable();
    logs.sort_unstable();
    let mut out = Recovered::default();
    let mut base = 0;
    for &g in checkpoints.iter().rev() {
        let p = checkpoint_path(dir, g);
        let data = fs::read(&p).map_err(io_err(&p))?;
        let (recs, valid) = parse_records(&data);
        if recs.len() == 1 && valid == data.len() {
            out.records.extend(recs);
            base = g;
            break;
        }
        tracing::warn!(path = %p.display(), "incomplete checkpoint ignored");
    }
    let logs: Vec<u64> = logs.into_iter().filter(|&g| g >= base).collect();
    for (i, &g) in logs.iter().enumerate() {
        let p = log_path(dir, g);
        let data = fs::read(&p).map_err(io_err(&p))?;
        let (recs, valid) = parse_records(&data);
        out.records.extend(recs);
        if valid < data.len() {
            let cut = (data.len() - valid) as u64;
            tracing::warn!(path = %p.display(), bytes = cut, valid, "torn log tail cut off");
            out.truncated += cut;
            if i + 1 < logs.len() {
                // A bad record in an older log: later logs cannot follow it.
                tracing::warn!(path = %p.display(), "corrupt record before the newest log; later logs dropped");
                let f = OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(io_err(&p))?;
                f.set_len(valid as u64).map_err(io_err(&p))?;
                for &later in &logs[i + 1..] {
                    let lp = log_path(dir, later);
                    fs::remove_file(&lp).map_err(io_err(&lp))?;
                }
                out.generation = g;
                out.log_bytes = valid as u64;
                return Ok(out);
            }
            let f = OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(io_err(&p))?;
            f.set_len(valid as u64).map_err(io_err(&p))?;
            f.sync_all().map_err(io_err(&p))?;
        }
        out.generation = g;
        out.log_bytes = valid as u64;
    }
    out.generation = out.generation.max(base);
    Ok(out)
}

enum Cmd {
    Append {
        token: u64,
        record: Bytes,
    },
    Checkpoint {
        snapshot: Bytes,
    },
    /// Flush everything queued, then answer.
    Sync(Sender<()>),
}

/// Where the writer reports durable tokens (in append order).
pub type Completion = Box<dyn FnMut(Vec<u64>) + Send>;

/// An open log: appends go to a writer thread.
pub struct Wal {
    tx: Option<Sender<Cmd>>,
    thread: Option<JoinHandle<Result<(), WalError>>>,
}

impl Wal {
    /// Recover `cfg.dir`, then open it for appending. `done` is called from
    /// the writer thread with the tokens of each durable group.
    pub fn open(cfg: WalConfig, done: Completion) -> Result<(Wal, Recovered), WalError> {
        let rec = recover(&cfg.dir)?;
        let p = log_path(&cfg.dir, rec.generation);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&p)
            .map_err(io_err(&p))?;
        file.seek(SeekFrom::End(0)).map_err(io_err(&p))?;
        sync_dir(&cfg.dir)?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let writer = Writer {
            generation: rec.generation,
            file,
            cfg,
            done,
            buf: Vec::with_capacity(1 << 16),
            tokens: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("tessera-wal".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| WalError::Io {
                path: p.clone(),
                source,
            })?;
        Ok((
            Wal {
                tx: Some(tx),
                thread: Some(thread),
            },
            rec,
        ))
    }

    fn send(&self, cmd: Cmd) -> Result<(), WalError> {
        self.tx
            .as_ref()
            .ok_or(WalError::Closed)?
            .send(cmd)
            .map_err(|_| WalError::Closed)
    }

    /// Append `record`; `token` is reported once it is durable.
    pub fn append(&self, token: u64, record: Bytes) -> Result<(), WalError> {
        self.send(Cmd::Append { token, record })
    }

    /// Replace everything appended so far by `snapshot` (see the module
    /// docs for the crash-safe sequence).
    pub fn checkpoint(&self, snapshot: Bytes) -> Result<(), WalError> {
        self.send(Cmd::Checkpoint { snapshot })
    }

    /// Wait until everything appended so far is durable.
    pub fn sync(&self) -> Result<(), WalError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.send(Cmd::Sync(tx))?;
        rx.recv().map_err(|_| WalError::Closed)
    }

    /// Flush and stop the writer; its error, if it failed.
    pub fn close(mut self) -> Result<(), WalError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), WalError> {
        drop(self.tx.take());
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| WalError::Closed)?,
            None => Ok(()),
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "log writer failed");
        }
    }
}

struct Writer {
    generation: u64,
    file: File,
    cfg: WalConfig,
    done: Completion,
    buf: Vec<u8>,
    tokens: Vec<u64>,
}

impl Writer {
    fn run(mut self, rx: Receiver<Cmd>) -> Result<(), WalError> {
        let r = self.serve(&rx);
        if let Err(e) = &r {
            tracing::error!(error = %e, "log writer stopped: records will not become durable");
        }
        r
    }

    fn serve(&mut self, rx: &Receiver<Cmd>) -> Result<(), WalError> {
        let mut group_start: Option<Instant> = None;
        loop {
            let cmd = match group_start {
                None => match rx.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return self.flush(),
                },
                Some(t) => {
                    let deadline = t + self.cfg.group_window;
                    match rx.recv_deadline(deadline) {
                        Ok(c) => Some(c),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => return self.flush(),
                    }
                }
            };
            match cmd {
                Some(Cmd::Append { token, record }) => {
                    frame(&record, &mut self.buf);
                    self.tokens.push(token);
                    group_start.get_or_insert_with(Instant::now);
                    // Without fsync there is nothing to amortize but the
                    // write call: write as soon as the channel is drained.
                    let full = self.buf.len() >= self.cfg.group_bytes;
                    if full || (!self.cfg.fsync && rx.is_empty()) {
                        self.flush()?;
                        group_start = None;
                    }
                }
                Some(Cmd::Checkpoint { snapshot }) => {
                    self.flush()?;
                    group_start = None;
                    self.checkpoint(&snapshot)?;
                }
                Some(Cmd::Sync(ack)) => {
                    self.flush()?;
                    group_start = None;
                    let _ = ack.send(());
                }
                None => {
                    self.flush()?;
                    group_start = None;
                }
            }
        }
    }

    fn path(&self) -> PathBuf {
        log_path(&self.cfg.dir, self.generation)
    }

    /// Write and (with fsync) sync the group, then report its tokens.
    fn flush(&mut self) -> Result<(), WalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let p = self.path();
        self.file.write_all(&self.buf).map_err(io_err(&p))?;
        if self.cfg.fsync {
            self.file.sync_data().map_err(io_err(&p))?;
        }
        self.buf.clear();
        let tokens = std::mem::take(&mut self.tokens);
        (self.done)(tokens);
        Ok(())
    }

    fn checkpoint(&mut self, snapshot: &[u8]) -> Result<(), WalError> {
        let dir = self.cfg.dir.clone();
        let old = self.generation;
        let next = old + 1;
        let lp = log_path(&dir, next);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&lp)
            .map_err(io_err(&lp))?;
        sync_dir(&dir)?;
        self.file = file;
        self.generation = next;
        let cp = checkpoint_path(&dir, next);
        let tmp = dir.join(format!("checkpoint-{next}.tmp"));
        let mut data = Vec::with_capacity(snapshot.len() + HEADER);
        frame(snapshot, &mut data);
        {
            let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
            f.write_all(&data).map_err(io_err(&tmp))?;
            f.sync_all().map_err(io_err(&tmp))?;
        }
        fs::rename(&tmp, &cp).map_err(io_err(&cp))?;
        sync_dir(&dir)?;
        for p in [checkpoint_path(&dir, old), log_path(&dir, old)] {
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&p)(e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
