"""How specviz makes its own draft weights for the embedded target: self-distillation on CPU."""
