import pathlib

pathlib.Path("custom_nodes/ComfyUI-Nodes-A/.installed").touch()
