//! Tokenizers: a Hugging Face `tokenizer.json` through the `tokenizers` crate, and the built-in
//! character tokenizer for the default task — itself a `tokenizers` BPE model with one token per
//! character and no merges, so it saves as a standard `tokenizer.json` that Hugging Face loads.

use crate::error::{Result, TrainerError};
use std::path::Path;
use tokenizers::models::bpe::BPE;
use tokenizers::{AddedToken, Tokenizer};

/// Padding token of the built-in tokenizer.
pub const PAD: &str = "<pad>";
/// End-of-sequence token of the built-in tokenizer.
pub const EOS: &str = "<eos>";
/// Characters of the built-in tokenizer (digits, operators, the task's punctuation).
pub const CHARS: &str = "0123456789+-*/=()#:, abcdefghijklmnopqrstuvwxyz?";

/// A tokenizer with the ids the trainer needs.
pub struct Tok {
    inner: Tokenizer,
    /// Padding id.
    pub pad_id: u32,
    /// End-of-sequence id (generation stops there).
    pub eos_id: u32,
}

impl Tok {
    /// The built-in character tokenizer: `<pad>`=0, `<eos>`=1, then [`CHARS`].
    pub fn builtin() -> Result<Tok> {
        let mut vocab: tokenizers::models::bpe::Vocab = Default::default();
        vocab.insert(PAD.into(), 0);
        vocab.insert(EOS.into(), 1);
        for (i, c) in CHARS.chars().enumerate() {
            vocab.insert(c.to_string(), i as u32 + 2);
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, Vec::new())
            .build()
            .map_err(|e| TrainerError::Tokenizer(e.to_string()))?;
        let mut inner = Tokenizer::new(bpe);
        inner.with_decoder(Some(tokenizers::decoders::fuse::Fuse::new()));
        inner
            .add_special_tokens([AddedToken::from(PAD, true), AddedToken::from(EOS, true)])
            .map_err(|e| TrainerError::Tokenizer(e.to_string()))?;
        Tok::wrap(inner, Path::new("<built-in>"))
    }

    /// Loads `tokenizer.json`; pad/eos from its special tokens (`<|endoftext|>`, `</s>`,
    /// `<eos>`, `<|im_end|>`, `<pad>`, `<|pad|>`), or `eos_id` from `config.json` when given.
    pub fn from_file(path: &Path, eos_id: Option<u32>) -> Result<Tok> {
        if !path.exists() {
            return Err(TrainerError::checkpoint(
                path,
                "tokenizer.json not found (a Hugging Face model directory needs one)",
            ));
        }
        let inner = Tokenizer::from_file(path)
            .map_err(|e| TrainerError::checkpoint(path, format!("unreadable tokenizer: {e}")))?;
        let mut tok = Tok::wrap(inner, path)?;
        if let Some(e) = eos_id {
            tok.eos_id = e;
        }
        Ok(tok)
    }

    fn wrap(inner: Tokenizer, path: &Path) -> Result<Tok> {
        let find = |names: &[&str]| names.iter().find_map(|n| inner.token_to_id(n));
        let eos = find(&[EOS, "<|endoftext|>", "</s>", "<|im_end|>", "<|eot_id|>"]);
        let eos_id = eos.ok_or_else(|| {
            TrainerError::checkpoint(path, "tokenizer has no end-of-sequence token")
        })?;
        let pad_id = find(&[PAD, "<|pad|>", "<|endoftext|>"]).unwrap_or(eos_id);
        Ok(Tok {
            inner,
            pad_id,
            eos_id,
        })
    }

    /// Vocabulary size including special tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids of `text` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| TrainerError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Text of `ids`, special tokens skipped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, true)
            .map_err(|e| TrainerError::Tokenizer(e.to_string()))
    }

    /// Writes `tokenizer.json`.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.inner
            .save(path, false)
            .map_err(|e| TrainerError::checkpoint(path, format!("cannot write tokenizer: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_a_padded_vocabulary_decode_to_nothing() {
        // `model.vocab_size` pads the built-in model's vocabulary past the tokenizer's.
        let t = Tok::builtin().unwrap();
        let mut ids = t.encode("12+3").unwrap();
        ids.extend([t.vocab_size() as u32, 8191]);
        assert_eq!(t.decode(&ids).unwrap(), "12+3");
    }

    #[test]
    fn builtin_round_trips_text() {
        let t = Tok::builtin().unwrap();
        let ids = t.encode("12+34=46").unwrap();
        assert_eq!(ids.len(), 8);
        assert_eq!(t.decode(&ids).unwrap(), "12+34=46");
        let mut with_eos = ids.clone();
        with_eos.push(t.eos_id);
        assert_eq!(t.decode(&with_eos).unwrap(), "12+34=46");
    }

    #[test]
    fn saved_tokenizer_json_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        let t = Tok::builtin().unwrap();
        t.save(&p).unwrap();
        let back = Tok::from_file(&p, None).unwrap();
        assert_eq!(back.encode("7*8=56").unwrap(), t.encode("7*8=56").unwrap());
        assert_eq!(back.eos_id, t.eos_id);
        assert_eq!(back.vocab_size(), t.vocab_size());
    }
}
