//! The built-in key-value calls (`get`, `put`, `incr`), as an application
//! builds them and as `tessera txn` parses them from the shell.

use crate::{display_value, TxnError, Value};
use std::fmt;
use std::sync::Arc;
use tessera_workloads::kv::{KvError, KvTxn};

/// One built-in key-value transaction ([`tessera_workloads::kv`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// Read these keys.
    Get(Vec<String>),
    /// Write each key's value.
    Put(Vec<(String, Value)>),
    /// Add `by` to the decimal integer at `key` (missing counts as 0).
    Incr { key: String, by: i64 },
}

const USAGE: &str = "get KEY..., put KEY=VALUE..., or incr KEY [BY]";

/// Why a call could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("no command: use {USAGE}")]
    Missing,
    #[error("unknown command '{0}': use {USAGE}")]
    Unknown(String),
    #[error("{command}: {problem} (usage: {usage})")]
    Usage {
        command: &'static str,
        problem: String,
        usage: &'static str,
    },
    #[error(transparent)]
    Kv(#[from] KvError),
}

impl Call {
    /// Read `keys`.
    pub fn get<S: Into<String>>(keys: impl IntoIterator<Item = S>) -> Result<Call, CallError> {
        Call::Get(keys.into_iter().map(Into::into).collect()).checked()
    }

    /// Write each `(key, value)`.
    pub fn put<K: Into<String>, V: AsRef<[u8]>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Call, CallError> {
        Call::Put(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), Value::copy_from_slice(v.as_ref())))
                .collect(),
        )
        .checked()
    }

    /// Add `by` to the integer at `key`.
    pub fn incr(key: impl Into<String>, by: i64) -> Result<Call, CallError> {
        Call::Incr {
            key: key.into(),
            by,
        }
        .checked()
    }

    /// Parse a shell command: `get KEY...`, `put KEY=VALUE...` or
    /// `incr KEY [BY]` (BY defaults to 1 and may be negative).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Call, CallError> {
        let (cmd, rest) = args.split_first().ok_or(CallError::Missing)?;
        let rest: Vec<&str> = rest.iter().map(AsRef::as_ref).collect();
        let usage = |command, usage, problem: String| CallError::Usage {
            command,
            problem,
            usage,
        };
        match cmd.as_ref() {
            "get" => {
                if rest.is_empty() {
                    return Err(usage("get", "get KEY...", "no key given".into()));
                }
                Call::get(rest)
            }
            "put" => {
                let u = |p| usage("put", "put KEY=VALUE...", p);
                if rest.is_empty() {
                    return Err(u("no KEY=VALUE given".into()));
                }
                let pairs = rest
                    .iter()
                    .map(|a| {
                        a.split_once('=')
                            .ok_or_else(|| u(format!("'{a}' is not KEY=VALUE")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Call::put(pairs)
            }
            "incr" => {
                let u = |p| usage("incr", "incr KEY [BY]", p);
                let by = match rest[..] {
                    [_] => 1,
                    [_, by] => by
                        .parse()
                        .map_err(|_| u(format!("'{by}' is not a 64-bit integer")))?,
                    [] => return Err(u("no key given".into())),
                    _ => return Err(u(format!("{} arguments, at most 2", rest.len()))),
                };
                Call::incr(rest[0], by)
            }
            other => Err(CallError::Unknown(other.to_string())),
        }
    }

    /// Check the keys and values (syntax, duplicates, sizes) once, by
    /// building the transaction for one shard.
    fn checked(self) -> Result<Call, CallError> {
        self.txn(1)?;
        Ok(self)
    }

    /// The transaction for a cluster of `shards` shards.
    pub(crate) fn txn(&self, shards: u32) -> Result<Arc<KvTxn>, KvError> {
        Ok(Arc::new(match self {
            Call::Get(keys) => {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                KvTxn::get(&keys, shards)?
            }
            Call::Put(pairs) => {
                let pairs: Vec<(&str, Value)> =
                    pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
                KvTxn::put(&pairs, shards)?
            }
            Call::Incr { key, by } => KvTxn::incr(key, *by, shards)?,
        }))
    }

    /// What the committed `txn` (built by [`Call::txn`]) returned.
    pub(crate) fn result(&self, txn: &KvTxn, outputs: &[Value]) -> Result<CallResult, TxnError> {
        Ok(match self {
            Call::Get(keys) => CallResult::Read(
                keys.iter()
                    .cloned()
                    .zip(txn.read_values(outputs)?)
                    .collect(),
            ),
            Call::Put(pairs) => CallResult::Written(pairs.clone()),
            Call::Incr { key, .. } => CallResult::Incremented {
                key: key.clone(),
                value: txn.incremented(outputs)?,
            },
        })
    }
}

/// What a committed [`Call`] returned. Its `Display` prints one `KEY = VALUE`
/// line per key (`KEY (not found)` for a missing key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallResult {
    /// `get`: each key with its value, in the order asked.
    Read(Vec<(String, Option<Value>)>),
    /// `put`: what was written.
    Written(Vec<(String, Value)>),
    /// `incr`: the new value.
    Incremented { key: String, value: i64 },
}

impl CallResult {
    /// The value of `key` the call read or wrote (`incr`: in decimal).
    pub fn value(&self, key: &str) -> Option<Value> {
        match self {
            CallResult::Read(kv) => kv.iter().find(|(k, _)| k == key)?.1.clone(),
            CallResult::Written(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
            CallResult::Incremented { key: k, value } if k == key => {
                Some(Value::from(value.to_string()))
            }
            CallResult::Incremented { .. } => None,
        }
    }
}

impl fmt::Display for CallResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = |f: &mut fmt::Formatter<'_>, i: usize, k: &str, v: Option<&Value>| {
            if i > 0 {
                writeln!(f)?;
            }
            match v {
                Some(v) => write!(f, "{k} = {}", display_value(v)),
                None => write!(f, "{k} (not found)"),
            }
        };
        match self {
            CallResult::Read(kv) => {
                for (i, (k, v)) in kv.iter().enumerate() {
                    line(f, i, k, v.as_ref())?;
                }
                Ok(())
            }
            CallResult::Written(kv) => {
                for (i, (k, v)) in kv.iter().enumerate() {
                    line(f, i, k, Some(v))?;
                }
                Ok(())
            }
            CallResult::Incremented { key, value } => write!(f, "{key} = {value}"),
        }
    }
}
