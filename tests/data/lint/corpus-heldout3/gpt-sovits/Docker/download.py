# Speech recognition (Paraformer), VAD and punctuation models used by the dataset tools.
from modelscope import snapshot_download

snapshot_download("damo/speech_paraformer-large_asr_nat-zh-cn-16k-common-vocab8404-pytorch")
snapshot_download("damo/speech_fsmn_vad_zh-cn-16k-common-pytorch")
snapshot_download("damo/punc_ct-transformer_zh-cn-common-vocab272727-pytorch")
