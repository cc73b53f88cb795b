"""``python -m llama_cpp.server`` with one setting it lacks: llama.cpp's "extra buffer types".

llama-cpp-python builds a model's parameters from llama.cpp's defaults and offers no setting
for ``use_extra_bufts``; where its AMX kernels are compiled in, their weight repacking crashes
the first decode of some quantised models (``llm.llama_cpp.extra_buffer_types``, see
docs/stages.md, "Portable llama.cpp"). So this sets it, then runs the server unchanged:
``python -m misbench.llm.llama_server --extra_buffer_types auto|true|false <its arguments>``.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    import llama_cpp
    import llama_cpp.llama_cpp as bindings

    from misbench.llm.models import use_extra_buffer_types

    setting = "auto"
    if "--extra_buffer_types" in argv:
        at = argv.index("--extra_buffer_types")
        setting = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    chosen = {"true": True, "false": False}.get(setting.lower(), setting)
    system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    extra = use_extra_buffer_types(chosen, system_info)
    default = bindings.llama_model_default_params

    def with_ours():
        params = default()
        params.use_extra_bufts = extra
        return params

    bindings.llama_model_default_params = with_ours  # the server loads one model, after this
    print(f"llama.cpp extra buffer types: {'on' if extra else 'off'} ({setting})", flush=True)
    sys.argv = ["llama_cpp.server", *argv]
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main(sys.argv[1:])
