// The calculator of the page "Before you rent GPUs" (before_you_rent_gpus.md). Its formulas
// are utils/sizing.py's, written again here; tests/test_rendered_book.py drives this page in
// Chromium and checks its numbers against the Python functions. Plain JavaScript, no
// network: it runs on any page that has an element with the id "gpu-calculator".
(function () {
  "use strict";

  const STAGES = {
    "replicated": [],
    "ZeRO-1": ["optimizer state"],
    "ZeRO-2": ["optimizer state", "gradients"],
    "ZeRO-3 / FSDP": ["optimizer state", "gradients", "weights"],
  };
  const TRAFFIC = { "replicated": 1.0, "ZeRO-1": 1.0, "ZeRO-2": 1.0, "ZeRO-3 / FSDP": 1.5 };
  const BYTES_PER_PARAMETER = {
    "fp32|SGD with momentum": { "weights": 4, "gradients": 4, "optimizer state": 4 },
    "fp32|Adam": { "weights": 4, "gradients": 4, "optimizer state": 8 },
    "bf16|SGD with momentum": { "weights": 2, "gradients": 2, "optimizer state": 8 },
    "bf16|Adam": { "weights": 2, "gradients": 2, "optimizer state": 12 },
    "autocast|SGD with momentum": { "weights": 4, "gradients": 4, "optimizer state": 4 },
    "autocast|Adam": { "weights": 4, "gradients": 4, "optimizer state": 8 },
  };
  const GPUS = {
    "T4": [16, null, 8.1e12],
    "L4": [24, 121e12, 30.3e12],
    "A100 40GB": [40, 312e12, 19.5e12],
    "A100 80GB": [80, 312e12, 19.5e12],
    "H100 SXM": [80, 989e12, 67e12],
    "H200": [141, 989e12, 67e12],
  };
  const BLOCK_ACTIVATIONS_PER_TOKEN = 16.5;
  const LABELS = {
    "replicated": "DDP (a whole copy on every GPU)",
    "ZeRO-3 / FSDP": "FSDP (ZeRO-3)",
    "any": "any model",
    "bf16": "bfloat16 mixed (ZeRO's layout)",
    "autocast": "bfloat16 autocast (float32 weights)",
    "fp32": "float32",
  };
  // The presets: the book's CNN (counted in tests/test_sizing.py), the recipes' transformer,
  // and models shaped like 7B and 70B ones built from the book's block.
  const PRESETS = {
    "The book's CNN": {
      kind: "any", parameters: 12810, flops: 3782784, activationBytes: 103984, batch: 64,
    },
    "The recipes' transformer": {
      kind: "transformer", layers: 4, width: 256, heads: 4, vocabulary: 256, context: 128,
      batch: 64,
    },
    "7B-shaped (32 x 4,096)": {
      kind: "transformer", layers: 32, width: 4096, heads: 32, vocabulary: 32000,
      context: 4096, batch: 1,
    },
    "70B-shaped (80 x 8,192)": {
      kind: "transformer", layers: 80, width: 8192, heads: 64, vocabulary: 32000,
      context: 4096, batch: 1,
    },
  };

  function transformerParameters(layers, width, vocabulary, context) {
    return layers * (12 * width ** 2 + 13 * width) + 2 * vocabulary * width + context * width
      + 2 * width;
  }

  function transformerFlopsPerToken(layers, width, vocabulary, context) {
    return 6 * (layers * 12 * width ** 2 + width * vocabulary) + 12 * layers * context * width;
  }

  function transformerActivationValues(layers, width, vocabulary, context, recompute) {
    const block = BLOCK_ACTIVATIONS_PER_TOKEN * width;
    const blocks = recompute ? layers * width + block : layers * block;
    return context * (blocks + vocabulary);
  }

  function memoryPerGpu(parameters, gpus, stage, precision, optimizer, activationBytes) {
    const sizes = BYTES_PER_PARAMETER[precision + "|" + optimizer];
    const held = {};
    for (const kind of ["weights", "gradients", "optimizer state"]) {
      held[kind] = parameters * sizes[kind] / (STAGES[stage].includes(kind) ? gpus : 1);
    }
    held["DDP's buckets"] = stage === "replicated" ? held["gradients"] : 0;
    held["activations"] = activationBytes;
    return held;
  }

  function stepTime(flopsPerExample, examples, gpus, peak, mfu, gradientBytes, stage,
    busBandwidth, latency, recompute) {
    const plain = flopsPerExample * examples / (mfu * peak);
    const compute = recompute ? plain * 4 / 3 : plain;
    const traffic = gradientBytes * TRAFFIC[stage];
    const communication = 2 * (gpus - 1) * (traffic / (gpus * busBandwidth) + latency);
    const backward = compute - plain / 3;
    return {
      compute_s: compute,
      communication_s: communication,
      hidden: communication <= backward,
      step_s: compute + Math.max(0, communication - backward),
    };
  }

  function isWhole(x) { return Number.isInteger(x) && x >= 1; }

  // Everything the page shows, from its inputs; an error message instead where an input is
  // wrong (never a NaN).
  function calculate(i) {
    const whole = i.kind === "transformer"
      ? ["layers", "width", "heads", "vocabulary", "context", "batch", "gpus"]
      : ["parameters", "batch", "gpus"];
    for (const name of whole) {
      if (!isWhole(i[name])) return { error: `${name} must be a whole number, 1 or more.` };
    }
    if (i.kind === "transformer" && i.width % i.heads !== 0) {
      return { error: `width ${i.width} is not divisible by heads ${i.heads}.` };
    }
    if (i.kind !== "transformer" && !(i.flops > 0 && i.activationBytes >= 0)) {
      return { error: "operations per example must be above 0, activations 0 or more." };
    }
    for (const name of ["mfu", "busBandwidth", "margin"]) {
      if (!(i[name] > 0) || (name !== "busBandwidth" && i[name] >= 1)) {
        return { error: `${name} must be above 0${name === "busBandwidth" ? "" : " and below 1"}.` };
      }
    }
    if (!(i.latency >= 0)) return { error: "latency must be 0 or more." };
    if (!(i.gpu in GPUS)) return { error: `unknown GPU ${i.gpu}.` };
    const [, bf16Peak, fp32Peak] = GPUS[i.gpu];
    const peak = i.precision === "fp32" ? fp32Peak : bf16Peak;
    if (peak === null) return { error: `the ${i.gpu} has no bfloat16: choose fp32.` };
    let parameters, flopsPerExample, activationBytes, tokens;
    const valueBytes = i.precision === "fp32" ? 4 : 2;
    if (i.kind === "transformer") {
      parameters = transformerParameters(i.layers, i.width, i.vocabulary, i.context);
      flopsPerExample = transformerFlopsPerToken(i.layers, i.width, i.vocabulary, i.context)
        * i.context;
      activationBytes = i.batch * valueBytes * transformerActivationValues(
        i.layers, i.width, i.vocabulary, i.context, i.recompute);
      tokens = i.context;
    } else {
      parameters = i.parameters;
      flopsPerExample = i.flops;
      activationBytes = i.batch * i.activationBytes * valueBytes / 4;
      tokens = 1;
    }
    const memory = memoryPerGpu(parameters, i.gpus, i.stage, i.precision, i.optimizer,
      activationBytes);
    const total = Object.values(memory).reduce((a, b) => a + b, 0);
    const fits = {};
    for (const [name, [gb]] of Object.entries(GPUS)) fits[name] = total <= (1 - i.margin) * gb * 1e9;
    const gradientBytes = parameters * BYTES_PER_PARAMETER[i.precision + "|" + i.optimizer].gradients;
    const step = stepTime(flopsPerExample, i.batch, i.gpus, peak, i.mfu, gradientBytes, i.stage,
      i.busBandwidth, i.latency, i.kind === "transformer" && i.recompute);
    const finite = [parameters, total, step.compute_s, step.communication_s, step.step_s];
    if (!finite.every(Number.isFinite) || !(step.step_s > 0)) {
      return { error: "these numbers are too large or too small to compute: check each field." };
    }
    return {
      parameters, memory, total, fits, step,
      unitsPerSecond: i.batch * tokens / step.step_s,
      unit: i.kind === "transformer" ? "tokens" : "examples",
    };
  }

  const FIELDS = [
    ["preset", "preset", "select", Object.keys(PRESETS).concat(["your own"])],
    ["kind", "model", "select", ["transformer", "any"]],
    ["layers", "layers", "number"], ["width", "width", "number"], ["heads", "heads", "number"],
    ["vocabulary", "vocabulary", "number"], ["context", "sequence length", "number"],
    ["parameters", "parameters", "number"],
    ["flops", "operations per example (forward and backward)", "number"],
    ["activationBytes", "saved activations per example, bytes in float32", "number"],
    ["batch", "batch per GPU (sequences or examples)", "number"],
    ["gpus", "GPUs", "number"],
    ["precision", "precision", "select", ["bf16", "autocast", "fp32"]],
    ["optimizer", "optimizer", "select", ["Adam", "SGD with momentum"]],
    ["stage", "sharding", "select", Object.keys(STAGES)],
    ["recompute", "recompute activations (transformer)", "checkbox"],
    ["gpu", "GPU for the step time", "select", Object.keys(GPUS)],
    ["mfu", "MFU (share of the peak reached)", "number", null, 0.4],
    ["busBandwidth", "bus bandwidth, GB/s", "number", null, 370],
    ["latency", "latency per ring step, µs", "number", null, 10],
    ["margin", "memory kept free (CUDA context, NCCL, fragmentation)", "number", null, 0.1],
  ];

  function readInputs(root) {
    const value = (name) => root.querySelector(`[name="${name}"]`);
    const i = {};
    for (const [name, , type] of FIELDS) {
      const element = value(name);
      if (type === "checkbox") i[name] = element.checked;
      else if (type === "number") i[name] = element.value === "" ? NaN : Number(element.value);
      else i[name] = element.value;
    }
    i.busBandwidth *= 1e9;
    i.latency *= 1e-6;
    return i;
  }

  const GB = (bytes) => (bytes / 1e9).toLocaleString("en", { maximumFractionDigits: 2 });
  const MS = (s) => (s * 1e3).toLocaleString("en", { maximumSignificantDigits: 3 });

  function render(root) {
    const out = root.querySelector(".calculator-output");
    const result = calculate(readInputs(root));
    if (result.error) {
      out.innerHTML = `<p class="calculator-error" role="alert">${result.error}</p>`;
      return;
    }
    const rows = Object.entries(result.memory).map(
      ([kind, bytes]) => `<tr><td>${kind}</td><td data-bytes="${bytes}">${GB(bytes)}</td></tr>`);
    const fits = Object.entries(result.fits).map(([name, ok]) =>
      `<tr><td>${name} (${GPUS[name][0]} GB)</td><td data-fits="${ok}">${ok ? "fits" : "does not fit"}</td></tr>`);
    const s = result.step;
    out.innerHTML = `
      <p>${result.parameters.toLocaleString("en")} parameters.</p>
      <table class="calculator-memory"><thead><tr><th>per GPU</th><th>GB</th></tr></thead>
      <tbody>${rows.join("")}<tr><td><b>total</b></td><td data-bytes="${result.total}"><b>${GB(result.total)}</b></td></tr></tbody></table>
      <table class="calculator-fits"><thead><tr><th>GPU</th><th>one GPU's share</th></tr></thead>
      <tbody>${fits.join("")}</tbody></table>
      <table class="calculator-step"><thead><tr><th>a step</th><th>ms</th></tr></thead><tbody>
      <tr><td>compute</td><td data-seconds="${s.compute_s}">${MS(s.compute_s)}</td></tr>
      <tr><td>gradients' all-reduce (ring)</td><td data-seconds="${s.communication_s}">${MS(s.communication_s)}</td></tr>
      <tr><td>the step, with what does not hide</td><td data-seconds="${s.step_s}">${MS(s.step_s)}</td></tr>
      </tbody></table>
      <p data-hidden="${s.hidden}">The all-reduce ${s.hidden ? "hides behind" : "does not hide behind"}
      the backward pass; about ${Math.round(result.unitsPerSecond).toLocaleString("en")}
      ${result.unit} per second per GPU.</p>`;
  }

  function applyPreset(root) {
    const preset = PRESETS[root.querySelector('[name="preset"]').value];
    if (!preset) return;
    for (const [name, value] of Object.entries(preset)) {
      root.querySelector(`[name="${name}"]`).value = value;
    }
    showKind(root);
  }

  function showKind(root) {
    const transformer = root.querySelector('[name="kind"]').value === "transformer";
    for (const name of ["layers", "width", "heads", "vocabulary", "context", "recompute"]) {
      root.querySelector(`[name="${name}"]`).closest("label").hidden = !transformer;
    }
    for (const name of ["parameters", "flops", "activationBytes"]) {
      root.querySelector(`[name="${name}"]`).closest("label").hidden = transformer;
    }
  }

  function build(root) {
    const form = document.createElement("form");
    form.className = "calculator-form";
    for (const [name, label, type, options, initial] of FIELDS) {
      const wrap = document.createElement("label");
      wrap.textContent = label + " ";
      let input;
      if (type === "select") {
        input = document.createElement("select");
        for (const option of options) input.add(new Option(LABELS[option] || option, option));
      } else {
        input = document.createElement("input");
        input.type = type;
        if (type === "number") input.step = "any";
      }
      input.name = name;
      if (initial !== undefined) input.value = initial;
      wrap.appendChild(input);
      form.appendChild(wrap);
    }
    form.querySelector('[name="gpu"]').value = "H100 SXM";
    form.querySelector('[name="gpus"]').value = 8;
    form.querySelector('[name="preset"]').value = "The recipes' transformer";
    const output = document.createElement("div");
    output.className = "calculator-output";
    output.setAttribute("aria-live", "polite");
    root.replaceChildren(form, output);
    applyPreset(root);
    form.addEventListener("input", (event) => {
      if (event.target.name === "preset") applyPreset(root);
      else if (event.target.name === "kind") showKind(root);
      else if (PRESETS[root.querySelector('[name="preset"]').value]
        && !["gpus", "precision", "optimizer", "stage", "recompute", "gpu", "mfu",
          "busBandwidth", "latency", "margin", "batch"].includes(event.target.name)) {
        root.querySelector('[name="preset"]').value = "your own";
      }
      render(root);
    });
    form.addEventListener("submit", (event) => event.preventDefault());
    render(root);
  }

  window.bookCalculator = { calculate, PRESETS, GPUS };
  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("gpu-calculator");
    if (root) build(root);
  });
})();
