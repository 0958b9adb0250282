"""Container entry point: `serve` starts Multi Model Server through the toolkit; anything else is run as a command."""
import shlex
import subprocess
import sys

if sys.argv[1] == "serve":
    from sagemaker_huggingface_inference_toolkit import serving

    serving.main()
else:
    subprocess.check_call(shlex.split(" ".join(sys.argv[1:])))

# keep the container up while MMS runs in the background
subprocess.call(["tail", "-f", "/dev/null"])
