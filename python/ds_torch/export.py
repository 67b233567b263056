"""export_training_step: a PyTorch model, its loss and optimizer as a ds
training step.

1. The forward and the loss are traced by `make_fx` at the aten level, over
   a functional wrapper (`torch.func.functional_call`) whose arguments are
   the parameters, the buffers and the batch, functionalised so that buffer
   mutations (BatchNorm's running statistics) appear as new values. The
   module path of every op (`nn_module_stack`) and its Python source line
   are recorded.
2. Subgraphs that depend on no argument (causal masks, iotas) are evaluated
   now and become constants.
3. Every other aten op goes through its rule (aten_rules.py); an op without
   a rule is an error naming the op and the source line, before anything
   is written.
4. The function gets the training-step contract: `ds.param` with
   `named_parameters()` names (tied weights are one parameter), `ds.state`
   for buffers and frozen parameters, `ds.input` for the batch, `ds.loss`,
   `ds.update` for mutated buffers, and per-parameter `ds.optim` from the
   optimizer's param_groups.

With `joint=True` the step also traces PyTorch's own backward
(`torch.autograd.grad`) and returns `ds.grad` results, instead of leaving
the backward to ds-autodiff.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.func import functional_call

from . import backward_rules  # noqa: F401 (registers the backward rules)
from .aten_rules import RULES, Const, Lazy, Opaque, Transposed
from .ds_ops import DS
from .mlir_text import (ExportError, FunctionBuilder, Location, Value, attr_dict, location,
                        string)
from .optim import optimizer_attributes

_TORCH_DIR = os.path.dirname(torch.__file__)
_THIS_DIR = os.path.dirname(__file__)
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')
_RANDOM_OPS = ("rand", "randn", "randint", "bernoulli", "native_dropout",
               "normal", "uniform", "randperm", "multinomial")


class ExportedStep:
    """The result of `export_training_step`.

    Attributes: `mlir` (the module text), `initial_values` (name or state
    key -> numpy array, one `.npy` each for `ds-run --params`), `params`,
    `states`, `inputs` (names in argument order), `level` ("forward" or
    "gradient").
    """

    def __init__(self, mlir: str, initial_values: dict[str, np.ndarray], params: list[str],
                 states: list[str], inputs: list[str], level: str) -> None:
        self.mlir = mlir
        self.initial_values = initial_values
        self.params, self.states, self.inputs = params, states, inputs
        self.level = level

    def save(self, mlir_path: str | os.PathLike[str], params_dir: str | None = None) -> None:
        """Writes the module and, if `params_dir` is given, one `.npy` per
        parameter and state. Each is written to a temporary name first and
        renamed, so a failure leaves no half-written output."""
        directory = os.path.dirname(os.path.abspath(mlir_path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ds_torch-", suffix=".mlir")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.mlir)
            if params_dir is not None:
                save_arrays(self.initial_values, params_dir)
            os.replace(tmp, mlir_path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def save_arrays(arrays: Mapping[str, np.ndarray], directory: str) -> None:
    """Writes `name.npy` for every array into `directory` atomically (a new
    directory renamed into place; an existing one is replaced)."""
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=".ds_torch-params-")
    try:
        for name, value in arrays.items():
            np.save(os.path.join(tmp, name + ".npy"), value)
        if os.path.isdir(directory):
            old = directory.rstrip("/") + ".old-ds_torch"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(directory, old)
            os.replace(tmp, directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _user_frame(stack_trace: str | None) -> Location | None:
    """(file, line, code) of the innermost frame outside torch and this
    package, from an fx node's stack trace."""
    if not stack_trace:
        return None
    best = None
    for path, line, _, code in _FRAME.findall(stack_trace):
        if path.startswith(_TORCH_DIR) or path.startswith(_THIS_DIR):
            continue
        best = (path, int(line), code.strip())
    return best


def _module_path(node: torch.fx.Node) -> str | None:
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path = list(stack.values())[-1][0]
    # Paths of submodules reached through attribute proxies look like
    # "L['self'].layers.0"; keep the dotted module path.
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    return path or None


def _fallback_location(fn: Callable[..., Any]) -> Location | None:
    """Where `fn` is defined, when it is the user's; else None."""
    try:
        path = inspect.getsourcefile(fn)
        line = inspect.getsourcelines(fn)[1]
    except (TypeError, OSError):
        return None
    if path is None or path.startswith(_TORCH_DIR):
        return None
    return (path, line, "")


class _Converter:
    """Walks the traced graph and builds the function body."""

    def __init__(self, graph: torch.fx.Graph, fallback_loc: Location | None) -> None:
        self.graph = graph
        self.fb = FunctionBuilder()
        self.ds = DS(self.fb)
        self.env = {}
        self.fallback_loc = fallback_loc
        self.node = None
        self.placeholder_index = {}
        self.updates = {}  # placeholder index -> Value

    # -- helpers for rules ---------------------------------------------------
    def location_of(self, node: torch.fx.Node) -> Location | None:
        frame = _user_frame(node.meta.get("stack_trace"))
        return frame or self.fallback_loc

    def unsupported(self, node: torch.fx.Node, what: str | None = None) -> ExportError:
        """An ExportError located at `node`'s source line: `what` is not
        supported, or, without `what`, the op has no mapping."""
        frame = self.location_of(node)
        where = "%s:%d: " % (frame[0], frame[1]) if frame else ""
        code = "\n    %s" % frame[2] if frame and frame[2] else ""
        if what is None:
            message = "%s has no ds mapping in the ds_torch front end" % node.target
        else:
            message = "%s: %s is not supported by the ds_torch front end" % (
                node.target, what)
        return ExportError("%serror: %s%s\n(the mapped aten ops are listed in "
                           "docs/TorchOpCoverage.md)" % (where, message, code))

    def scalar(self, v: bool | int | float, dtype: torch.dtype) -> Value:
        return self.fb.scalar(v, dtype)

    def constant(self, tensor: torch.Tensor) -> Value:
        return self.fb.constant(tensor)

    def dtype_of(self, x: Any) -> torch.dtype:
        if isinstance(x, (Value, Const, Transposed)):
            return x.dtype
        if isinstance(x, Lazy):
            return x.first.dtype
        if isinstance(x, bool):
            return torch.bool
        if isinstance(x, int):
            return torch.int64
        return torch.get_default_dtype()

    def value(self, x: Any, dtype: torch.dtype | None = None) -> Value:
        """Materialises `x` as a Value, cast to `dtype` when given."""
        if isinstance(x, Lazy):
            x = x.first
        if isinstance(x, Opaque):
            raise self.unsupported(x.node, "use of %s" % x.what)
        if isinstance(x, Transposed):
            x = self.ds.transpose(x.source, [1, 0])
        if isinstance(x, Const):
            t = x.tensor if dtype is None else x.tensor.to(dtype)
            return self.fb.constant(t)
        if isinstance(x, (bool, int, float)):
            return self.fb.scalar(x, dtype or self.dtype_of(x))
        if not isinstance(x, Value):
            raise ExportError("internal: cannot use %r as a tensor" % (x,))
        if dtype is not None and x.dtype != dtype:
            return self.ds.cast(x, dtype)
        return x

    def producer_of(self, arg: Any) -> torch.fx.Node | None:
        return arg if isinstance(arg, torch.fx.Node) else None

    def _placeholder_of(self, x: Any) -> int | None:
        for node, value in self.env.items():
            if value is x and node.op == "placeholder":
                return self.placeholder_index[node]
        return None

    def record_inplace_update(self, buffer_value: Any, new_value: Value) -> None:
        index = self._placeholder_of(buffer_value)
        if index is not None:
            self.updates[index] = new_value

    def record_copy(self, dst_node: torch.fx.Node, src: Any) -> None:
        if dst_node.op != "placeholder":
            raise self.unsupported(self.node, "an in-place write into an "
                                              "intermediate tensor")
        self.updates[self.placeholder_index[dst_node]] = self.value(src)

    # -- the walk --------------------------------------------------------------
    def _live_nodes(self):
        """Nodes the outputs and buffer writes depend on."""
        def writes(n):  # copy_, add_, ...: in-place aten ops
            schema = getattr(n.target, "_schema", None)
            return schema is not None and schema.is_mutable
        roots = [n for n in self.graph.nodes if n.op == "output" or writes(n)]
        live, todo = set(), list(roots)
        while todo:
            n = todo.pop()
            if n in live:
                continue
            live.add(n)
            todo.extend(n.all_input_nodes)
        return live

    def _is_constant(self, node, const_nodes):
        if node.op != "call_function":
            return False
        name = getattr(node.target, "__name__", "")
        if any(name.startswith(r) for r in _RANDOM_OPS):
            return False
        return all(n in const_nodes for n in node.all_input_nodes)

    def _map_args(self, args):
        def conv(a):
            if isinstance(a, torch.fx.Node):
                return self.env[a]
            if isinstance(a, (list, tuple)):
                return type(a)(conv(x) for x in a)
            return a
        return conv(args)

    def _fold(self, node):
        def real(a):
            if isinstance(a, torch.fx.Node):
                v = self.env[a]
                return v.tensor if isinstance(v, Const) else v
            if isinstance(a, (list, tuple)):
                return type(a)(real(x) for x in a)
            return a
        out = node.target(*real(node.args), **real(node.kwargs))
        if isinstance(out, torch.Tensor):
            return Const(out)
        if isinstance(out, (tuple, list)):
            return tuple(Const(o) if isinstance(o, torch.Tensor) else o for o in out)
        return out

    def run(self, arg_values: Sequence[Value]) -> Any:
        live = self._live_nodes()
        const_nodes = set()
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        for i, (node, value) in enumerate(zip(placeholders, arg_values)):
            self.env[node] = value
            self.placeholder_index[node] = i
        outputs = None
        for node in self.graph.nodes:
            if node.op == "placeholder" or node not in live:
                continue
            self.node = node
            if node.op == "output":
                outputs = self._map_args(node.args[0])
                continue
            if self._is_constant(node, const_nodes):
                self.env[node] = self._fold(node)
                const_nodes.add(node)
                continue
            self.fb.loc = self.location_of(node)
            path = _module_path(node)
            self.fb.op_attrs = {"ds.module": string(path)} if path else {}
            if node.target is __import__("operator").getitem:
                container, index = node.args
                self.env[node] = self.env[container][index]
                continue
            fn = RULES.get(node.target)
            functional = _functional_variant(node.target) if fn is None else None
            if fn is None and functional not in RULES:
                raise self.unsupported(node)
            args = self._map_args(node.args)
            kwargs = {k: self._map_args(v) for k, v in node.kwargs.items()}
            if fn is not None:
                self.env[node] = fn(self, node, *args, **kwargs)
                continue
            # An in-place op (x.add_(1), relu_) in an unfunctionalised trace:
            # the functional op's value becomes the new value of its target.
            result = self.value(RULES[functional](self, node, *args, **kwargs),
                                self.dtype_of(args[0]))
            target = node.args[0]
            self.env[node] = self.env[target] = result
            if target.op == "placeholder":
                self.updates[self.placeholder_index[target]] = result
        return outputs


def _functional_variant(target: Any) -> Any:
    """aten.add_.Tensor -> aten.add.Tensor, for in-place overloads."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return None
    packet = target.overloadpacket.__name__
    if not packet.endswith("_"):
        return None
    functional = getattr(torch.ops.aten, packet[:-1], None)
    return getattr(functional, target._overloadname, None) if functional else None


def _flatten_outputs(outputs: Any) -> list[Any]:
    if isinstance(outputs, (list, tuple)):
        flat = []
        for o in outputs:
            flat.extend(_flatten_outputs(o))
        return flat
    return [outputs]


def export_training_step(model: torch.nn.Module, loss_fn: Callable[..., torch.Tensor],
                         example_batch: Sequence[torch.Tensor],
                         optimizer: torch.optim.Optimizer | None = None, *,
                         input_names: Sequence[str] | None = None, joint: bool = False,
                         func_name: str = "step") -> ExportedStep:
    """Exports one training step of `model` as a ds module.

    `loss = loss_fn(model(*example_batch[:-1]), example_batch[-1])` defines
    the step: every element of `example_batch` but the last goes to the
    model, the last is the loss's target. Shapes and dtypes are those of the
    example batch (ds steps have static shapes). `optimizer` (SGD, Adam,
    AdamW) gives per-parameter `ds.optim` attributes; parameters it does not
    hold, and parameters with `requires_grad=False`, are state (not
    trained). `input_names` names the batch tensors (default `input`,
    `target`, or `input0`, ... `target`). `joint=True` imports PyTorch's own
    backward as `ds.grad` results instead of leaving it to ds-autodiff.

    Returns an `ExportedStep`; raises `ExportError` naming the first aten op
    it cannot map and its source line.
    """
    batch = tuple(example_batch)
    if len(batch) < 2:
        raise ExportError("example_batch must hold the model's inputs and the "
                          "loss target (at least two tensors)")
    if input_names is None:
        input_names = (["input"] if len(batch) == 2 else
                       ["input%d" % i for i in range(len(batch) - 1)]) + ["target"]
    if len(input_names) != len(batch):
        raise ExportError("input_names has %d names for %d batch tensors"
                          % (len(input_names), len(batch)))
    for name, t in zip(input_names, batch):
        if not isinstance(t, torch.Tensor):
            raise ExportError("batch element '%s' is not a tensor" % name)

    named_params = list(model.named_parameters())
    optim_attrs = optimizer_attributes(optimizer, named_params)
    trained = [(n, p) for n, p in named_params if p.requires_grad and
               (optim_attrs is None or n in optim_attrs)]
    trained_names = {n for n, _ in trained}
    frozen = [(n, p) for n, p in named_params if n not in trained_names]
    buffers = list(model.named_buffers())
    names = [n for n, _ in trained] + [n for n, _ in frozen] + [n for n, _ in buffers]
    n_trained, n_state = len(trained), len(frozen) + len(buffers)

    def step(*flat):
        tensors = dict(zip(names, flat[:len(names)]))
        xs = flat[len(names):]
        out = functional_call(model, tensors, tuple(xs[:-1]))
        loss = loss_fn(out, xs[-1])
        if not joint:
            return loss
        grads = torch.autograd.grad(loss, flat[:n_trained], allow_unused=True)
        return (loss,) + tuple(grads)
    step._orig_mod = model  # make_fx records nn_module_stack against it

    initial = [p.detach().clone() for _, p in trained + frozen] + \
              [b.detach().clone() for _, b in buffers]
    if joint:
        for t in initial[:n_trained]:
            t.requires_grad_(True)
    # Tracing runs the model on real tensors, and BatchNorm updates its
    # running statistics in place: trace on copies, keep `initial` intact.
    trace_args = [t.detach().clone().requires_grad_(t.requires_grad) for t in initial] + \
        [t.detach() for t in batch]
    # Functionalisation turns buffer writes into copy_ nodes; it drops
    # requires_grad, so the joint trace goes without it and sees the writes
    # in place (add_ of batch counters; batch norm's running statistics are
    # updated inside native_batch_norm either way).
    traced = step if joint else torch.func.functionalize(step, remove="mutations_and_views")
    try:
        graph = make_fx(traced, record_module_stack=True,
                        record_stack_traces=True)(*trace_args)
    except ExportError:
        raise
    except Exception as e:  # a model the tracer rejects
        raise ExportError("tracing %s with make_fx failed: %s: %s"
                          % (type(model).__name__, type(e).__name__, e)) from e
    # Arguments.
    arg_values, arg_specs = [], []
    for i, (name, t) in enumerate(zip(names + list(input_names), trace_args)):
        v = Value("%%a%d" % i, t.shape, t.dtype)
        arg_values.append(v)
        if i < n_trained:
            attrs = {"ds.param": string(name), "ds.init": "#ds.init<file>"}
            if optim_attrs is not None:
                attrs["ds.optim"] = optim_attrs[name]
        elif i < n_trained + n_state:
            attrs = {"ds.state": "#ds.state<%s>" % string(name),
                     "ds.init": "#ds.init<file>"}
        else:
            attrs = {"ds.input": string(name)}
        arg_specs.append("%s: %s%s" % (v.name, v.type, attr_dict(attrs)))

    converter = _Converter(graph.graph, _fallback_location(loss_fn))
    outputs = _flatten_outputs(converter.run(arg_values))
    fb = converter.fb
    fb.loc, fb.op_attrs = converter.fallback_loc, {}

    results = []  # (Value, attribute dict)
    loss = converter.value(outputs[0])
    if loss.rank != 0 or not loss.dtype.is_floating_point:
        raise ExportError("the loss must be a floating-point scalar, got %s" % loss.type)
    results.append((loss, {"ds.loss": ""}))
    if joint:
        for i, g in enumerate(outputs[1:1 + n_trained]):
            if g is None:
                g = converter.constant(torch.zeros_like(initial[i]))
            results.append((converter.value(g, initial[i].dtype),
                            {"ds.grad": "%d : i64" % i}))
    for index in sorted(converter.updates):
        if not n_trained <= index < n_trained + n_state:
            raise ExportError("the step writes into argument %d (%s), which is not a "
                              "buffer" % (index, (names + list(input_names))[index]))
        v = converter.value(converter.updates[index], initial[index].dtype)
        results.append((v, {"ds.update": "%d : i64" % index}))

    def result_spec(v, attrs):
        text = ", ".join(k if not val else "%s = %s" % (k, val) for k, val in attrs.items())
        return "%s {%s}" % (v.type, text)

    lines = ["// Exported by ds_torch from %s (torch %s)%s." % (
        type(model).__name__, torch.__version__,
        ", with PyTorch's backward" if joint else "")]
    lines.append("func.func @%s(%s)\n    -> (%s) attributes {ds.train_step} {" % (
        func_name, ",\n    ".join(arg_specs),
        ", ".join(result_spec(v, a) for v, a in results)))
    lines.extend(fb.lines)
    lines.append("    return %s : %s %s" % (
        ", ".join(v.name for v, _ in results), ", ".join(v.type for v, _ in results),
        location(converter.fallback_loc)))
    lines.append("}")
    text = "\n".join(lines) + "\n"

    values = {name: t.detach().numpy().copy() for name, t in zip(names, initial)}
    return ExportedStep(text, values, [n for n, _ in trained],
                        [n for n, _ in frozen] + [n for n, _ in buffers],
                        list(input_names), "gradient" if joint else "forward")
