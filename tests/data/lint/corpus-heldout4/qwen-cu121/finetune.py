"""Full-parameter, LoRA and Q-LoRA fine-tuning entry point (deepspeed)."""
if __name__ == "__main__":
    print("see finetune/*.sh")
