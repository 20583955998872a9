//! Decoding a trigger invocation body in one pass, with bounded memory.
//!
//! `{"Data": {"<binding>": documents}, "Metadata": {…}}`: `documents` arrives as a JSON array, a
//! string holding the array, or a string holding such a string. The decoder never builds the
//! envelope as a `Value` and never copies the array: it walks the body with serde, parses a
//! string-wrapped array straight from the string the parser hands it, and counts while it goes,
//! so a batch over [`MAX_DOCUMENTS`] documents or [`MAX_VALUES`] JSON values fails at the first
//! one too many, before the rest is built. Everything else in the envelope is skipped unread.
//!
//! Each decoded document is then held to the rules the API holds its input to
//! ([`screen::check_document`]), and what no request could have written is left out.
//!
//! Longer than most files: serde visitors are verbose, and the three nested shapes
//! (envelope, binding, document array) are easier to check against each other side by side.

mod screen;

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use time::OffsetDateTime;

use screen::{screen, Refused};

/// The most documents one invocation may carry. The triggers' `maxItemsPerInvocation` must not
/// exceed it (checked by the tests against `functions/*/function.json`).
pub const MAX_DOCUMENTS: usize = 1_000;

/// The most JSON values (objects, arrays, strings, numbers, … and object keys) all documents of
/// one invocation may hold together: about 250 per document, an order of magnitude above what an
/// item of this app has. It bounds the memory a decoded batch takes whatever its shape.
pub const MAX_VALUES: usize = 250_000;

/// How many times a string may wrap the documents.
pub const MAX_STRING_WRAPS: usize = 2;

/// A decoded invocation of a change-feed trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The changed documents, in feed order.
    pub documents: Vec<Value>,
    /// `Metadata.RetryContext.RetryCount`: 0 on a first delivery.
    pub retry_count: u64,
    /// The documents left out because they break the API's rules (`screen::check_document`).
    pub refused: Vec<Refused>,
}

/// Why an invocation body could not be understood.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body has no `Data` object")]
    NoData,
    #[error("`Data` has no `{0}` binding")]
    NoBinding(String),
    #[error("`Data.{binding}` is not a JSON array of documents, nor a string holding one: {why}")]
    NotDocuments { binding: String, why: String },
    #[error("the batch holds more than {MAX_DOCUMENTS} documents")]
    TooManyDocuments,
    #[error("the documents hold more than {MAX_VALUES} JSON values together")]
    TooManyValues,
}

impl DecodeError {
    /// Whether the batch was refused for its size (413) rather than its shape (400).
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            DecodeError::TooManyDocuments | DecodeError::TooManyValues
        )
    }
}

/// Decode `{"Data": {"<binding>": documents}, "Metadata": {…}}`, whichever of the three encodings
/// `documents` arrives in.
pub fn decode(body: &[u8], binding: &str) -> Result<Batch, DecodeError> {
    let ctx = Ctx {
        binding,
        failure: RefCell::new(None),
        values: RefCell::new(0),
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = EnvelopeSeed(&ctx)
        .deserialize(&mut de)
        .and_then(|envelope| de.end().map(|()| envelope));
    // A failure the decoder named wins over the parser's generic message about it.
    if let Some(failure) = ctx.failure.into_inner() {
        return Err(failure);
    }
    let envelope = parsed.map_err(|e| DecodeError::NotJson(e.to_string()))?;
    let documents = envelope.documents.ok_or_else(|| match envelope.data {
        false => DecodeError::NoData,
        true => DecodeError::NoBinding(binding.to_string()),
    })?;
    let (documents, refused) = screen(documents, OffsetDateTime::now_utc());
    Ok(Batch {
        documents,
        retry_count: envelope.retry_count,
        refused,
    })
}

/// What the seeds share: the binding sought, the first named failure, the values counted.
struct Ctx<'b> {
    binding: &'b str,
    failure: RefCell<Option<DecodeError>>,
    values: RefCell<usize>,
}

impl Ctx<'_> {
    /// Record `failure` (the first one stays) and stop the parser.
    fn fail<E: de::Error>(&self, failure: DecodeError) -> E {
        let message = failure.to_string();
        self.failure.borrow_mut().get_or_insert(failure);
        E::custom(message)
    }

    fn not_documents<E: de::Error>(&self, why: String) -> E {
        self.fail(DecodeError::NotDocuments {
            binding: self.binding.to_string(),
            why,
        })
    }

    fn count_value<E: de::Error>(&self) -> Result<(), E> {
        let mut n = self.values.borrow_mut();
        *n += 1;
        if *n > MAX_VALUES {
            return Err(self.fail(DecodeError::TooManyValues));
        }
        Ok(())
    }
}

struct Envelope {
    /// Whether a `Data` object was there.
    data: bool,
    documents: Option<Vec<Value>>,
    retry_count: u64,
}

struct EnvelopeSeed<'c, 'b>(&'c Ctx<'b>);

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_, '_> {
    type Value = Envelope;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Envelope, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_, '_> {
    type Value = Envelope;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an invocation object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut envelope = Envelope {
            data: false,
            documents: None,
            retry_count: 0,
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "Data" => {
                    let documents = map.next_value_seed(DataSeed(self.0))?;
                    envelope.data = true;
                    envelope.documents = documents;
                }
                "Metadata" => {
                    let metadata: Option<Metadata> = map.next_value()?;
                    envelope.retry_count = metadata
                        .and_then(|m| m.retry_context)
                        .and_then(|r| r.retry_count)
                        .and_then(|n| n.0)
                        .unwrap_or(0);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(envelope)
    }
}

#[derive(serde::Deserialize)]
struct Metadata {
    #[serde(rename = "RetryContext")]
    retry_context: Option<RetryContext>,
}

#[derive(serde::Deserialize)]
struct RetryContext {
    #[serde(rename = "RetryCount")]
    retry_count: Option<RetryCount>,
}

/// `RetryCount`: a whole number, or anything else, skipped unread (so an array or object there
/// builds nothing, however large or deep) and taken as no retry.
struct RetryCount(Option<u64>);

impl<'de> de::Deserialize<'de> for RetryCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RetryCountVisitor)
    }
}

struct RetryCountVisitor;

impl<'de> Visitor<'de> for RetryCountVisitor {
    type Value = RetryCount;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a retry count")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RetryCount, E> {
        Ok(RetryCount(Some(v)))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<RetryCount, E> {
        Ok(RetryCount(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<RetryCount, E> {
        Ok(RetryCount(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<RetryCount, E> {
        Ok(RetryCount(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<RetryCount, E> {
        Ok(RetryCount(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<RetryCount, E> {
        Ok(RetryCount(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RetryCount, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(RetryCount(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RetryCount, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(RetryCount(None))
    }
}

/// `Data`: an object whose `<binding>` entry holds the documents.
struct DataSeed<'c, 'b>(&'c Ctx<'b>);

impl<'de> DeserializeSeed<'de> for DataSeed<'_, '_> {
    type Value = Option<Vec<Value>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DataSeed<'_, '_> {
    type Value = Option<Vec<Value>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a `Data` object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut documents = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.0.binding && documents.is_none() {
                documents = Some(map.next_value_seed(DocumentsSeed {
                    ctx: self.0,
                    wraps: 0,
                })?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(documents)
    }
    // Anything but an object is no `Data` at all.
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.0.fail(DecodeError::NoData))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.0.fail(DecodeError::NoData))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.0.fail(DecodeError::NoData))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(self.0.fail(DecodeError::NoData))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.0.fail(DecodeError::NoData))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.0.fail(DecodeError::NoData))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(self.0.fail(DecodeError::NoData))
    }
}

/// The documents: an array of objects, or a string holding (a string holding) one.
struct DocumentsSeed<'c, 'b> {
    ctx: &'c Ctx<'b>,
    wraps: usize,
}

impl<'de> DeserializeSeed<'de> for DocumentsSeed<'_, '_> {
    type Value = Vec<Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl DocumentsSeed<'_, '_> {
    fn found<E: de::Error>(&self, what: &str) -> E {
        self.ctx.not_documents(format!("found {what}"))
    }
}

impl<'de> Visitor<'de> for DocumentsSeed<'_, '_> {
    type Value = Vec<Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of documents")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Value>, A::Error> {
        let mut documents = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_DOCUMENTS));
        loop {
            if documents.len() == MAX_DOCUMENTS {
                // One more element, whatever it is, is one too many: refuse before reading it.
                return match seq.next_element::<IgnoredAny>() {
                    Ok(None) => Ok(documents),
                    _ => Err(self.ctx.fail(DecodeError::TooManyDocuments)),
                };
            }
            match seq.next_element_seed(BoundedValue(self.ctx))? {
                None => return Ok(documents),
                Some(doc @ Value::Object(_)) => documents.push(doc),
                Some(_) => {
                    let i = documents.len();
                    return Err(self.ctx.not_documents(format!("item {i} is not an object")));
                }
            }
        }
    }

    /// The array serialized into a string: parse it from the string as the parser hands it over,
    /// without keeping a copy.
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Vec<Value>, E> {
        if self.wraps == MAX_STRING_WRAPS {
            return Err(self
                .ctx
                .not_documents(format!("wrapped in more than {MAX_STRING_WRAPS} strings")));
        }
        let mut inner = serde_json::Deserializer::from_str(s);
        let seed = DocumentsSeed {
            ctx: self.ctx,
            wraps: self.wraps + 1,
        };
        match seed
            .deserialize(&mut inner)
            .and_then(|docs| inner.end().map(|()| docs))
        {
            Ok(docs) => Ok(docs),
            // Named inside (too many, not an object, …): pass it on.
            Err(e) if self.ctx.failure.borrow().is_some() => Err(E::custom(e)),
            Err(e) => Err(self
                .ctx
                .not_documents(format!("the string is not JSON: {e}"))),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Value>, A::Error> {
        // Read past it first (keeping nothing), so that text that is not JSON at all is named so.
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Err(self.found("an object"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Vec<Value>, E> {
        Err(self.found("a boolean"))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Vec<Value>, E> {
        Err(self.found("a number"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Vec<Value>, E> {
        Err(self.found("a number"))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Vec<Value>, E> {
        Err(self.found("a number"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Vec<Value>, E> {
        Err(self.found("null"))
    }
}

/// A `serde_json::Value` built while counting every value against [`MAX_VALUES`].
struct BoundedValue<'c, 'b>(&'c Ctx<'b>);

impl<'de> DeserializeSeed<'de> for BoundedValue<'_, '_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoundedValue<'_, '_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.count_value()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.0.count_value()?;
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.count_value()?;
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.count_value()?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.count_value()?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.0.count_value()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.0.count_value()?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.count_value()?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(BoundedValue(self.0))? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.count_value()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.0.count_value()?;
            let value = map.next_value_seed(BoundedValue(self.0))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(documents: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "Data": { "documents": documents },
            "Metadata": { "RetryContext": { "RetryCount": 2, "MaxRetryCount": -1 } }
        }))
        .unwrap()
    }

    fn wrapped(documents: &Value, times: usize) -> Value {
        (0..times).fold(documents.clone(), |v, _| {
            Value::String(serde_json::to_string(&v).unwrap())
        })
    }

    #[test]
    fn documents_decode_from_an_array_a_string_or_a_string_in_a_string() {
        let docs = json!([{ "id": "p1", "postId": "p1", "type": "post", "n": [1, 2.5, null, true],
                           "text": "quote \" backslash \\ é 👩‍💻" }]);
        for times in 0..=MAX_STRING_WRAPS {
            let batch = decode(&body(wrapped(&docs, times)), "documents").unwrap();
            assert_eq!(Value::Array(batch.documents), docs, "{times}");
            assert_eq!(batch.retry_count, 2);
        }
    }

    #[test]
    fn a_first_delivery_has_no_retry_context() {
        let b = br#"{"Data":{"documents":[]},"Metadata":{}}"#;
        assert_eq!(
            decode(b, "documents").unwrap(),
            Batch {
                documents: vec![],
                retry_count: 0,
                refused: vec![],
            }
        );
        // Other bindings and other envelope members are skipped.
        let b = br#"{"Other":[1],"Data":{"x":{"y":[]},"documents":[{"id":"a"}]}}"#;
        assert_eq!(decode(b, "documents").unwrap().documents.len(), 1);
    }

    /// Only a whole-number `RetryCount` is read: an array or object there, however long or deep,
    /// is skipped without being built and the batch is decoded as a first delivery.
    #[test]
    fn a_huge_or_deep_retry_context_is_skipped_unbuilt() {
        let docs = r#"{"Data":{"documents":[{"id":"p1"}]},"Metadata":{"RetryContext":"#;
        let long = format!(
            r#"{docs}{{"RetryCount":[{}0]}}}}}}"#,
            "0,".repeat(1_000_000)
        );
        let (batch, held) = crate::allocations::peak(|| decode(long.as_bytes(), "documents"));
        let batch = batch.unwrap();
        assert_eq!((batch.documents.len(), batch.retry_count), (1, 0));
        assert!(
            held < long.len() / 4,
            "decoding held {held} bytes for a {} byte body",
            long.len()
        );
        let depth = 100_000;
        let deep = format!(
            r#"{docs}{{"RetryCount":{}1{},"MaxRetryCount":-1}}}}}}"#,
            "[{\"a\":".repeat(depth),
            "}]".repeat(depth)
        );
        let batch = decode(deep.as_bytes(), "documents").unwrap();
        assert_eq!((batch.documents.len(), batch.retry_count), (1, 0));
        // A number is still read.
        let counted = format!(r#"{docs}{{"RetryCount":3,"Other":[[[]]]}}}}}}"#);
        assert_eq!(
            decode(counted.as_bytes(), "documents").unwrap().retry_count,
            3
        );
    }

    #[test]
    fn what_is_not_a_batch_is_named() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "not JSON"),
            (
                b"{\"Data\":{\"documents\":[]}} trailing".to_vec(),
                "not JSON",
            ),
            (br#"{"Metadata":{}}"#.to_vec(), "no `Data`"),
            (br#"{"Data":[]}"#.to_vec(), "no `Data`"),
            (br#"{"Data":{"other":[]}}"#.to_vec(), "no `documents`"),
            (body(json!({"id": "p1"})), "found an object"),
            (body(json!(7)), "found a number"),
            (body(json!(null)), "found null"),
            (body(json!("{not json")), "string is not JSON"),
            (body(wrapped(&json!([]), 3)), "more than 2 strings"),
            (body(json!([{"id": "p1"}, 3])), "item 1 is not an object"),
            (
                body(wrapped(&json!([{"id": "p1"}, 3]), 2)),
                "item 1 is not an object",
            ),
        ];
        for (b, expected) in cases {
            let e = decode(&b, "documents").unwrap_err();
            assert!(!e.is_too_large());
            let e = e.to_string();
            assert!(e.contains(expected), "{e:?} should mention {expected:?}");
        }
    }

    #[test]
    fn a_batch_over_the_limits_is_refused_in_every_encoding() {
        let docs =
            |n: usize| Value::Array((0..n).map(|i| json!({ "id": i.to_string() })).collect());
        for times in 0..=MAX_STRING_WRAPS {
            let at_limit = decode(&body(wrapped(&docs(MAX_DOCUMENTS), times)), "documents");
            assert_eq!(at_limit.unwrap().documents.len(), MAX_DOCUMENTS);
            let over = decode(&body(wrapped(&docs(MAX_DOCUMENTS + 1), times)), "documents");
            assert_eq!(over.unwrap_err(), DecodeError::TooManyDocuments, "{times}");
            // Whatever the extra element is.
            let mut extra = docs(MAX_DOCUMENTS);
            extra.as_array_mut().unwrap().push(json!(3));
            let over = decode(&body(wrapped(&extra, times)), "documents");
            assert_eq!(over.unwrap_err(), DecodeError::TooManyDocuments, "{times}");
        }
        // Few documents made of many values.
        let wide = json!([{ "id": "a", "v": vec![0; MAX_VALUES] }]);
        let e = decode(&body(wide), "documents").unwrap_err();
        assert_eq!(e, DecodeError::TooManyValues);
        assert!(e.is_too_large());
    }
}
