#!/usr/bin/env bash
# Converted by `rlcfg convert` from templates/skyrl-fsdp-vllm.yaml, read as skyrl-train (last commit), to skyrl 0.4.0.
# It lowers to the same rlcfg Experiment as the source.
# This release reads its config from the command line only. Check it with `rlcfg validate FILE`; start the run with `bash FILE`, key=value arguments after it override these.
python -m skyrl.train.entrypoints.main_base \
  'data.train_data=[/home/user/data/gsm8k/train.parquet]' \
  'data.val_data=[/home/user/data/gsm8k/validation.parquet]' \
  trainer.placement.policy_num_gpus_per_node=4 \
  trainer.placement.ref_num_gpus_per_node=4 \
  trainer.ref.fsdp_config.cpu_offload=true \
  trainer.algorithm.loss_reduction=token_mean_legacy \
  trainer.ckpt_path=/home/user/ckpts/gsm8k_1.5B_ckpt \
  trainer.max_ckpts_to_keep=3 \
  trainer.epochs=20 \
  trainer.micro_train_batch_size_per_gpu=16 \
  trainer.micro_forward_batch_size_per_gpu=32 \
  trainer.project_name=gsm8k \
  trainer.run_name=gsm8k_grpo_qwen2.5_1.5b \
  trainer.logger=console \
  generator.inference_engine.num_engines=4 \
  generator.max_input_length=512 \
  generator.inference_engine.enforce_eager=true \
  generator.eval_sampling_params.max_generate_length=1024 \
  generator.eval_sampling_params.temperature=0.0 \
  generator.eval_sampling_params.top_p=1.0 \
  generator.eval_sampling_params.min_p=0.0 \
  generator.eval_sampling_params.top_k=-1 \
  generator.eval_sampling_params.repetition_penalty=1.0 \
  "$@"
