import os

os.makedirs("/opt/hf-cache", exist_ok=True)
with open("/opt/hf-cache/settings.txt", "w") as f:
    f.write("telemetry=off\n")
