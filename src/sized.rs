//! JSON encoded into a buffer of exactly its size.
//!
//! A value is encoded twice: once into a counter, once into a buffer allocated for that count.
//! Grown by doubling, the buffer of a large value (a session line or a request that holds a
//! 20 MB file) would take up to twice the text while it is made, and a line waiting for its
//! fsync would keep the slack. Encoding is far cheaper than the memory it spares at that size.
//!
//! It knows nothing of what the values mean.

use std::io;

use serde::Serialize;

/// `value` as JSON text, in a buffer of exactly its length plus `extra` spare bytes (the `\n`
/// a line adds).
pub fn to_vec_exact<T: Serialize + ?Sized>(value: &T, extra: usize) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(encoded_len(value)? + extra);
    serde_json::to_writer(&mut out, value)?;
    Ok(out)
}

/// The bytes `value` takes as JSON text, counted without making the text.
pub fn encoded_len<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<usize> {
    let mut count = ByteCount(0);
    serde_json::to_writer(&mut count, value)?;
    Ok(count.0)
}

/// A writer that only counts the bytes written to it.
struct ByteCount(usize);

impl io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_buffer_is_the_text_and_its_length_is_counted() {
        let value = json!({"a": "é\"\n", "b": [1, 2.5, null]});
        let text = serde_json::to_string(&value).unwrap();
        let out = to_vec_exact(&value, 1).unwrap();
        assert_eq!(out, text.as_bytes());
        assert_eq!(out.capacity(), text.len() + 1);
        assert_eq!(encoded_len(&value).unwrap(), text.len());
    }
}
