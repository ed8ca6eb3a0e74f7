//! Checkpoints: Hugging Face model directories (`config.json`, `model.safetensors`,
//! `tokenizer.json`) and verl-style actor checkpoints
//! (`{default_local_dir}/global_step_{N}/actor/` with the HF model under `huggingface/` and one
//! optimizer shard per rank), plus `latest_checkpointed_iteration.txt` for `resume_mode: auto`.

use crate::error::{Result, TrainerError};
use crate::model::{ModelConfig, ParamStore};
use crate::optim::ShardedAdamW;
use crate::tokenizer::Tok;
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Writes a Hugging Face model directory.
pub fn save_hf(dir: &Path, config: &ModelConfig, params: &ParamStore, tok: &Tok) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| TrainerError::io(dir, e))?;
    let cfg_path = dir.join("config.json");
    let json = serde_json::to_string_pretty(config).expect("config serialises");
    std::fs::write(&cfg_path, json).map_err(|e| TrainerError::io(&cfg_path, e))?;
    let tensors: HashMap<String, Tensor> = params.named_tensors().into_iter().collect();
    let st = dir.join("model.safetensors");
    candle_core::safetensors::save(&tensors, &st)
        .map_err(|e| TrainerError::checkpoint(&st, format!("cannot write: {e}")))?;
    tok.save(&dir.join("tokenizer.json"))
}

/// Reads a Hugging Face model directory; errors name the file that is missing or wrong.
pub fn load_hf(dir: &Path, device: &Device) -> Result<(ModelConfig, ParamStore, Tok)> {
    if !dir.is_dir() {
        return Err(TrainerError::checkpoint(
            dir,
            "model directory does not exist",
        ));
    }
    let cfg_path = dir.join("config.json");
    let text = std::fs::read_to_string(&cfg_path)
        .map_err(|e| TrainerError::checkpoint(&cfg_path, format!("cannot read: {e}")))?;
    let config: ModelConfig = serde_json::from_str(&text)
        .map_err(|e| TrainerError::checkpoint(&cfg_path, format!("invalid config.json: {e}")))?;
    if !config
        .hidden_size
        .is_multiple_of(config.num_attention_heads)
        || !config.num_attention_heads.is_multiple_of(config.kv_heads())
    {
        return Err(TrainerError::checkpoint(
            &cfg_path,
            "hidden_size / num_attention_heads / num_key_value_heads are inconsistent",
        ));
    }
    let files = safetensors_files(dir)?;
    let mut tensors: HashMap<String, (Tensor, PathBuf)> = HashMap::new();
    for f in &files {
        let map = candle_core::safetensors::load(f, device)
            .map_err(|e| TrainerError::checkpoint(f, format!("unreadable safetensors: {e}")))?;
        tensors.extend(map.into_iter().map(|(k, v)| (k, (v, f.clone()))));
    }
    let params =
        ParamStore::from_tensors(&config, |n| tensors.get(n).map(|(t, _)| t.clone()), device)
            .map_err(|m| {
                let file = files.first().cloned().unwrap_or_else(|| dir.to_path_buf());
                TrainerError::checkpoint(file, m)
            })?;
    let tok = Tok::from_file(&dir.join("tokenizer.json"), config.eos_token_id)?;
    if tok.vocab_size() > config.vocab_size {
        return Err(TrainerError::checkpoint(
            dir.join("tokenizer.json"),
            format!(
                "tokenizer has {} tokens, config.json vocab_size is {}",
                tok.vocab_size(),
                config.vocab_size
            ),
        ));
    }
    Ok((config, params, tok))
}

fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| TrainerError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(TrainerError::checkpoint(
            dir,
            "no *.safetensors weights in the model directory",
        ));
    }
    Ok(files)
}

/// `global_step_{step}/actor` under `root`.
pub fn actor_dir(root: &Path, step: u64) -> PathBuf {
    root.join(format!("global_step_{step}")).join("actor")
}

fn optim_file(dir: &Path, world: usize, rank: usize) -> PathBuf {
    dir.join(format!("optim_world_size_{world}_rank_{rank}.safetensors"))
}

/// Saves this rank's part of an actor checkpoint (rank 0 also writes the model and marks the
/// step as the latest once every rank has written, see [`mark_latest`]).
pub fn save_actor(
    root: &Path,
    step: u64,
    rank: usize,
    world: usize,
    model: Option<(&ModelConfig, &ParamStore, &Tok)>,
    opt: &ShardedAdamW,
) -> Result<PathBuf> {
    let dir = actor_dir(root, step);
    std::fs::create_dir_all(&dir).map_err(|e| TrainerError::io(&dir, e))?;
    if let Some((c, p, t)) = model {
        save_hf(&dir.join("huggingface"), c, p, t)?;
    }
    let f = optim_file(&dir, world, rank);
    candle_core::safetensors::save(&opt.to_tensors()?, &f)
        .map_err(|e| TrainerError::checkpoint(&f, format!("cannot write: {e}")))?;
    Ok(dir)
}

/// Records `step` as the latest complete checkpoint.
pub fn mark_latest(root: &Path, step: u64) -> Result<()> {
    let p = root.join("latest_checkpointed_iteration.txt");
    std::fs::write(&p, step.to_string()).map_err(|e| TrainerError::io(&p, e))
}

/// The latest complete checkpoint step under `root`, if any.
pub fn latest(root: &Path) -> Option<u64> {
    std::fs::read_to_string(root.join("latest_checkpointed_iteration.txt"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Loads this rank's optimizer shard of the checkpoint in `dir`.
pub fn load_optim(dir: &Path, world: usize, rank: usize, opt: &mut ShardedAdamW) -> Result<()> {
    let f = optim_file(dir, world, rank);
    if !f.exists() {
        return Err(TrainerError::checkpoint(
            &f,
            format!(
                "no optimizer shard for rank {rank} of {world} (was the checkpoint written with another rank count?)"
            ),
        ));
    }
    let t = candle_core::safetensors::load(&f, &Device::Cpu)
        .map_err(|e| TrainerError::checkpoint(&f, format!("unreadable: {e}")))?;
    opt.load_tensors(&t)
        .map_err(|m| TrainerError::checkpoint(&f, m))
}
