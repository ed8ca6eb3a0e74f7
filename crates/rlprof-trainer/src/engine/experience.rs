//! The make-experience role calls after generation: scoring (reward and overlong shaping), GRPO
//! advantages, and the actor's and reference's log-prob passes.

use super::{Engine, Sample, SeqBatch, data_module};
use crate::algo;
use crate::comm::Communicator;
use crate::data::Prompt;
use crate::error::Result;
use crate::host_op;
use crate::reward;
use rlprof_profiler::{iteration, plan::IterKind};

impl<C: Communicator> Engine<C> {
    /// Scores every sample (reward function, then DAPO overlong shaping when on).
    pub fn score(&self, prompts: &[Prompt], samples: &mut [Sample]) -> Result<()> {
        let max = self.cfg.data.max_response_length;
        let ol = &self.cfg.overlong;
        for s in samples.iter_mut() {
            let p = &prompts[s.group];
            let text = self.tok.decode(&s.response)?;
            s.score = reward::score(&p.data_source, &p.text, &text, &p.ground_truth);
            s.reward = s.score;
            if ol.enable {
                s.reward +=
                    reward::overlong_penalty(s.response.len(), max, ol.len, ol.penalty_factor);
            }
        }
        Ok(())
    }

    /// GRPO advantages over each prompt's `n` samples (samples are grouped consecutively).
    pub fn advantages(&self, samples: &mut [Sample], n: usize) {
        let r: Vec<f32> = samples.iter().map(|s| s.reward).collect();
        let adv = algo::grpo_advantages(&r, n, self.cfg.algorithm.norm_adv_by_std_in_grpo);
        for (s, a) in samples.iter_mut().zip(adv) {
            s.adv = a;
        }
    }

    /// `compute_log_prob` (actor) or `compute_ref_log_prob` (reference), in micro-batches.
    pub fn log_probs(&self, samples: &mut [Sample], reference: bool) -> Result<()> {
        let (model, mb) = if reference {
            let m = self.ref_model.as_ref().unwrap_or(&self.eval_model);
            (m, self.cfg.ref_log_prob_micro_batch_size_per_gpu)
        } else {
            (
                &self.eval_model,
                self.cfg.rollout.log_prob_micro_batch_size_per_gpu,
            )
        };
        let temp = self.cfg.rollout.temperature;
        crate::model::precision::golden_weights(|| {
            let params = match &self.ref_params {
                Some(p) if reference => p,
                _ => &self.actor,
            };
            let model = serde_json::to_string_pretty(&self.mcfg).unwrap_or_default();
            (model, params.named_tensors())
        });
        for chunk in samples.chunks_mut(mb) {
            let _it = iteration(IterKind::MicroBatch);
            let refs: Vec<&Sample> = chunk.iter().collect();
            let batch = SeqBatch::new(&refs, self.tok.pad_id, &self.device)?;
            let lp = batch.logprobs_only(model, temp)?;
            let rows = host_op!(
                "to_host",
                data_module(),
                lp.elem_count() * 4,
                lp.to_vec2::<f32>()
            )?;
            for (s, row) in chunk.iter_mut().zip(rows) {
                let v = row[..s.response.len()].to_vec();
                if reference {
                    s.ref_logp = v;
                } else {
                    s.old_logp = v;
                }
            }
        }
        Ok(())
    }
}
