//! The GRPO/DAPO trainer.
