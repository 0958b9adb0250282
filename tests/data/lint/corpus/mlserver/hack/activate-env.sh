#!/bin/bash
set -e
conda activate base
