#!/bin/bash
python finetune.py --model_name_or_path "$1" --data_path "$2" --use_lora
