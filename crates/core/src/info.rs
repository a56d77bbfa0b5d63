//! Info objects: ordered (key, value) string pairs with MPI's length limits.

use crate::error::MpiResult;
use crate::mpi_err;

/// Longest key, in bytes (MPI_MAX_INFO_KEY minus the terminating NUL).
pub const MAX_KEY: usize = 255;
/// Longest value, in bytes (MPI_MAX_INFO_VAL minus the terminating NUL).
pub const MAX_VALUE: usize = 1023;

/// An info object: keys in insertion order (MPI_Info_get_nthkey numbers them that way).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    entries: Vec<(String, String)>,
}

fn check_key(key: &str) -> MpiResult<()> {
    if key.is_empty() {
        return mpi_err!(InfoKey, "info key is empty");
    }
    if key.len() > MAX_KEY {
        return mpi_err!(InfoKey, "info key of {} bytes is longer than {MAX_KEY}", key.len());
    }
    Ok(())
}

impl Info {
    /// An empty info object.
    pub fn new() -> Info {
        Info::default()
    }

    /// Set `key` to `value` (replacing an existing value in place).
    pub fn set(&mut self, key: &str, value: &str) -> MpiResult<()> {
        check_key(key)?;
        if value.len() > MAX_VALUE {
            return mpi_err!(InfoValue, "info value of {} bytes is longer than {MAX_VALUE}", value.len());
        }
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = value.to_string(),
            None => self.entries.push((key.to_string(), value.to_string())),
        }
        Ok(())
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> MpiResult<Option<&str>> {
        check_key(key)?;
        Ok(self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()))
    }

    /// Remove `key`; MPI_ERR_INFO_NOKEY if it is not set.
    pub fn delete(&mut self, key: &str) -> MpiResult<()> {
        check_key(key)?;
        match self.entries.iter().position(|(k, _)| k == key) {
            Some(i) => {
                self.entries.remove(i);
                Ok(())
            }
            None => mpi_err!(InfoNokey, "info key {key:?} is not set"),
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `n`-th key (0-based, in insertion order).
    pub fn nth_key(&self, n: i32) -> MpiResult<&str> {
        match usize::try_from(n).ok().and_then(|i| self.entries.get(i)) {
            Some((k, _)) => Ok(k),
            None => mpi_err!(Arg, "key index {n} out of range (the info object has {} keys)", self.entries.len()),
        }
    }

    /// All (key, value) pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn set_get_delete_order() {
        let mut i = Info::new();
        i.set("b", "1").unwrap();
        i.set("a", "2").unwrap();
        i.set("b", "3").unwrap();
        assert_eq!(i.len(), 2);
        assert_eq!(i.nth_key(0).unwrap(), "b");
        assert_eq!(i.nth_key(1).unwrap(), "a");
        assert_eq!(i.get("b").unwrap(), Some("3"));
        assert_eq!(i.get("c").unwrap(), None);
        assert_eq!(i.delete("c").unwrap_err().class, ErrorClass::InfoNokey);
        i.delete("b").unwrap();
        assert_eq!(i.nth_key(0).unwrap(), "a");
        assert_eq!(i.nth_key(1).unwrap_err().class, ErrorClass::Arg);
        assert_eq!(i.nth_key(-1).unwrap_err().class, ErrorClass::Arg);
    }

    #[test]
    fn limits() {
        let mut i = Info::new();
        assert_eq!(i.set("", "x").unwrap_err().class, ErrorClass::InfoKey);
        assert_eq!(i.set(&"k".repeat(256), "x").unwrap_err().class, ErrorClass::InfoKey);
        i.set(&"k".repeat(255), "x").unwrap();
        assert_eq!(i.set("k", &"v".repeat(1024)).unwrap_err().class, ErrorClass::InfoValue);
        i.set("k", &"v".repeat(1023)).unwrap();
    }
}
