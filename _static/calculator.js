// The calculator of the page "Before you rent GPUs" (before_you_rent_gpus.md). Its formulas
// are utils/sizing.py's, written again here; tests/book/test_rendered_book.py drives this page in
// Chromium and checks its numbers, presets, labels and messages against the Python ones.
// Plain JavaScript, no network: it runs on any page with an element of id "gpu-calculator".
(function () {
  "use strict";

  const STAGES = {
    "replicated": [],
    "ZeRO-1": ["optimizer state"],
    "ZeRO-2": ["optimizer state", "gradients"],
    "ZeRO-3 / FSDP": ["optimizer state", "gradients", "weights"],
  };
  // Bytes a value of FSDP's gathers of the weights and of the gradients' reductions.
  const COLLECTIVE_BYTES = { "fp32": [4, 4], "bf16": [2, 2], "autocast": [2, 4], "fp16": [2, 4] };
  const BYTES_PER_PARAMETER = {
    "fp32|SGD with momentum": { "weights": 4, "gradients": 4, "optimizer state": 4 },
    "fp32|Adam": { "weights": 4, "gradients": 4, "optimizer state": 8 },
    "bf16|SGD with momentum": { "weights": 2, "gradients": 2, "optimizer state": 8 },
    "bf16|Adam": { "weights": 2, "gradients": 2, "optimizer state": 12 },
    "autocast|SGD with momentum": { "weights": 4, "gradients": 4, "optimizer state": 4 },
    "autocast|Adam": { "weights": 4, "gradients": 4, "optimizer state": 8 },
    "fp16|SGD with momentum": { "weights": 4, "gradients": 4, "optimizer state": 4 },
    "fp16|Adam": { "weights": 4, "gradients": 4, "optimizer state": 8 },
  };
  const GPUS = {
    "T4": { memory_gb: 16, bf16: null, fp32: 8.1e12, fp16: 65e12 },
    "L4": { memory_gb: 24, bf16: 121e12, fp32: 30.3e12, fp16: 121e12 },
    "A10": { memory_gb: 24, bf16: 125e12, fp32: 31.2e12, fp16: 125e12 },
    "L40S": { memory_gb: 48, bf16: 362e12, fp32: 91.6e12, fp16: 362e12 },
    "A100 40GB": { memory_gb: 40, bf16: 312e12, fp32: 19.5e12, fp16: 312e12 },
    "A100 80GB": { memory_gb: 80, bf16: 312e12, fp32: 19.5e12, fp16: 312e12 },
    "H100 PCIe": { memory_gb: 80, bf16: 756e12, fp32: 51e12, fp16: 756e12 },
    "H100 SXM": { memory_gb: 80, bf16: 989e12, fp32: 67e12, fp16: 989e12 },
    "H200 SXM": { memory_gb: 141, bf16: 989e12, fp32: 67e12, fp16: 989e12 },
  };
  const PEAK_OF = { "bf16": "bf16", "autocast": "bf16", "fp16": "fp16", "fp32": "fp32" };
  const MLP_MATRICES = { "gelu": 2, "swiglu": 3 };
  const BLOCK_WIDTHS = { "gelu": 6.5, "swiglu": 8.0 };
  const ACTIVATIONS_PER_MLP_WIDTH = { "gelu": 2, "swiglu": 4 };
  const DEFAULT_MFU = 40;
  const EVIDENCE = "recipes/measured/nvidia_h100_80gb_hbm3_evidence.jsonl";
  const LLAMA_2 = { kind: "transformer", mlp: "swiglu", tied: false, vocabulary: 32000,
    context: 4096 };
  const RECIPES_TRANSFORMER = { kind: "transformer", mlp: "gelu", tied: false,
    vocabulary: 256, batch: 64, precision: "autocast" };
  // As utils/sizing.py's PRESETS (the test compares them): the fields each sets, and where
  // its MFU was measured.
  const PRESETS = {
    "The book's CNN": {
      kind: "any", parameters: 12810, flops: 3782784, activationBytes: 103984, batch: 64,
      precision: "autocast", mfu: 0.00739, tokensToTrain: 350 * 64,
      measured: { gpu: "H100 SXM", precision: "autocast", row: "CNN, torch_ddp, bf16" },
    },
    "The recipes' transformer (3.3 M)": {
      ...RECIPES_TRANSFORMER, layers: 4, width: 256, heads: 4, kvHeads: 4, mlpWidth: 1024,
      context: 128, mfu: 1.03, tokensToTrain: 300 * 64 * 128,
      measured: { gpu: "H100 SXM", precision: "autocast",
        row: "transformer recipe size, torch_ddp" },
    },
    "The recipes' large transformer (153 M)": {
      ...RECIPES_TRANSFORMER, layers: 12, width: 1024, heads: 16, kvHeads: 16,
      mlpWidth: 4096, context: 1024, mfu: 35.8, tokensToTrain: 64 * 64 * 1024,
      measured: { gpu: "H100 SXM", precision: "autocast",
        row: "transformer large, batch 64, torch_ddp" },
    },
    "Llama 2 7B": {
      ...LLAMA_2, layers: 32, width: 4096, heads: 32, kvHeads: 32, mlpWidth: 11008, batch: 1,
      precision: "bf16", mfu: DEFAULT_MFU, tokensToTrain: 2.0e12, measured: null,
    },
    "Llama 2 70B": {
      ...LLAMA_2, layers: 80, width: 8192, heads: 64, kvHeads: 8, mlpWidth: 28672, batch: 1,
      precision: "bf16", mfu: DEFAULT_MFU, tokensToTrain: 2.0e12, measured: null,
    },
  };
  const OPTIONS = {
    "replicated": "DDP (a whole copy on every GPU)",
    "ZeRO-3 / FSDP": "FSDP (ZeRO-3)",
    "any": "any model",
    "gelu": "GELU MLP, 2 matrices (the book's, GPT-2)",
    "swiglu": "SwiGLU MLP, 3 matrices (Llama)",
    "bf16": "bfloat16 mixed (ZeRO's layout)",
    "autocast": "bfloat16 autocast (float32 weights)",
    "fp16": "float16 autocast (float32 weights, loss scaling)",
    "fp32": "float32",
  };

  // The form: [name, label, type, options or null, initial value]. The labels are
  // utils/sizing.py's LABELS.
  const SHAPE = ["layers", "width", "heads", "kvHeads", "mlpWidth", "mlp", "tied",
    "vocabulary", "context"];
  const ANY = ["parameters", "flops", "activationBytes"];
  const FIELDS = [
    ["preset", "preset", "select", Object.keys(PRESETS).concat(["your own"])],
    ["kind", "model", "select", ["transformer", "any"]],
    ["layers", "layers", "number"], ["width", "width", "number"],
    ["heads", "attention heads", "number"], ["kvHeads", "key-value heads", "number"],
    ["mlpWidth", "MLP width", "number"], ["mlp", "block", "select", ["gelu", "swiglu"]],
    ["tied", "input and output embeddings tied", "checkbox"],
    ["vocabulary", "vocabulary", "number"], ["context", "sequence length", "number"],
    ["parameters", "parameters", "number"],
    ["flops", "operations per example (forward and backward)", "number"],
    ["activationBytes", "saved activations per example, bytes in float32", "number"],
    ["batch", "batch per GPU (sequences or examples)", "number"],
    ["accumulation", "gradient accumulation steps", "number", null, 1],
    ["precision", "precision", "select", ["bf16", "autocast", "fp16", "fp32"]],
    ["optimizer", "optimizer", "select", ["Adam", "SGD with momentum"]],
    ["stage", "sharding", "select", Object.keys(STAGES)],
    ["recompute", "recompute activations (transformer)", "checkbox"],
    ["tokensToTrain", "tokens to train (examples, for any model)", "number"],
    ["price", "price per GPU-hour (empty: no cost)", "number"],
    ["gpu", "GPU", "select", Object.keys(GPUS), "H100 SXM"],
    ["mfu", "MFU, % of the GPU's peak", "number"],
    ["gpus", "GPUs", "number", null, 8],
    ["gpusPerMachine", "GPUs per machine", "number", null, 8],
    ["busBandwidth", "bus bandwidth inside a machine, GB/s", "number", null, 370],
    ["network", "network between machines, Gb/s per machine", "number", null, 3200],
    ["latency", "latency per ring step, µs", "number", null, 10],
    ["margin", "memory kept free, %", "number", null, 10],
  ];
  const LABELS = Object.fromEntries(FIELDS.map(([name, label]) => [name, label]));
  // The form's parts, each from its first field on.
  const GROUPS = { preset: "The model", batch: "The training", gpu: "The GPUs" };
  // Sources beside the fields (the MFU's note depends on the preset: mfuNote below).
  const NOTES = {
    busBandwidth: 'NCCL\'s ring on 8 H100s over NVLink: <a href="https://github.com/NVIDIA/'
      + 'nccl-tests/issues/212">nccl-tests#212</a>.',
    network: "3,200: 8 × 400 Gb/s InfiniBand, an adapter per GPU, NCCL running a ring on "
      + "each (a DGX H100); 100: one 100 Gb/s Ethernet adapter. Line rates.",
    latency: "A guess: measure yours.",
  };

  function shape(width, heads, kvHeads, mlpWidth, mlp) {
    return [width / heads * kvHeads, mlpWidth];
  }

  function transformerParameters(i) {
    const [kv, hidden] = shape(i.width, i.heads, i.kvHeads, i.mlpWidth, i.mlp);
    const w = i.width;
    const matrices = 2 * w ** 2 + 2 * w * kv + MLP_MATRICES[i.mlp] * w * hidden;
    let block, rest;
    if (i.mlp === "gelu") {
      block = matrices + 2 * w + 2 * kv + hidden + w + 4 * w;
      rest = i.vocabulary * w + i.context * w + 2 * w;
    } else {
      block = matrices + 2 * w;
      rest = i.vocabulary * w + w;
    }
    return i.layers * block + rest + (i.tied ? 0 : i.vocabulary * w);
  }

  function transformerFlopsPerToken(i) {
    const [kv, hidden] = shape(i.width, i.heads, i.kvHeads, i.mlpWidth, i.mlp);
    const w = i.width;
    const matrices = 2 * w ** 2 + 2 * w * kv + MLP_MATRICES[i.mlp] * w * hidden;
    return 6 * (i.layers * matrices + w * i.vocabulary) + 12 * i.layers * i.context * w;
  }

  function transformerActivationValues(i) {
    const [kv, hidden] = shape(i.width, i.heads, i.kvHeads, i.mlpWidth, i.mlp);
    const block = BLOCK_WIDTHS[i.mlp] * i.width + 2 * kv + ACTIVATIONS_PER_MLP_WIDTH[i.mlp] * hidden;
    const blocks = i.recompute ? i.layers * i.width + block : i.layers * block;
    return i.context * (blocks + i.vocabulary);
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

  function ringBandwidth(gpus, gpusPerMachine, inside, between) {
    if (gpus <= gpusPerMachine || inside <= between) return [inside, "inside a machine"];
    return [between, "between machines"];
  }

  // A step's collectives as the one all-reduce that sends as much (utils.sizing).
  function allReduceBytes(parameters, stage, precision) {
    const [gather, reduce] = COLLECTIVE_BYTES[precision];
    if (stage === "ZeRO-3 / FSDP") return parameters * (2 * gather + reduce) / 2;
    return parameters * reduce;
  }

  function stepTime(flopsPerExample, examples, gpus, peak, mfu, sentBytes, busBandwidth,
    latency, recompute, accumulation) {
    const plain = flopsPerExample * examples / (mfu * peak);
    const micro = recompute ? plain * 4 / 3 : plain;
    const compute = accumulation * micro;
    const communication = 2 * (gpus - 1) * (sentBytes / (gpus * busBandwidth) + latency);
    const backward = micro - plain / 3;
    return {
      compute_s: compute,
      communication_s: communication,
      hidden: communication <= backward,
      step_s: compute + Math.max(0, communication - backward),
    };
  }

  function isWhole(x) { return Number.isInteger(x) && x >= 1; }

  // What is wrong with the inputs, naming the form's labels (utils.sizing.problem).
  function problem(i) {
    const transformer = i.kind === "transformer";
    const counts = ["batch", "accumulation", "gpus", "gpusPerMachine"];
    const whole = transformer
      ? ["layers", "width", "heads", "kvHeads", "mlpWidth", "vocabulary", "context", ...counts]
      : ["parameters", ...counts];
    for (const name of whole) {
      if (!isWhole(i[name])) return `“${LABELS[name]}” must be a whole number, 1 or more.`;
    }
    if (transformer && i.width % i.heads !== 0) {
      return `“${LABELS.heads}” (${i.heads}) must divide the width (${i.width}).`;
    }
    if (transformer && i.heads % i.kvHeads !== 0) {
      return `“${LABELS.kvHeads}” (${i.kvHeads}) must divide the attention heads (${i.heads}).`;
    }
    if (!transformer && !(i.flops > 0 && i.activationBytes >= 0)) {
      return `“${LABELS.flops}” must be above 0, and “${LABELS.activationBytes}” 0 or more.`;
    }
    if (i.gpus > i.gpusPerMachine && i.gpus % i.gpusPerMachine !== 0) {
      return `${i.gpus} GPUs do not fill whole machines of ${i.gpusPerMachine}: `
        + `change “${LABELS.gpus}” or “${LABELS.gpusPerMachine}”.`;
    }
    for (const name of ["mfu", "margin"]) {
      if (!(i[name] > 0 && i[name] < 100)) return `“${LABELS[name]}” must lie between 0 and 100.`;
    }
    for (const name of ["busBandwidth", "network", "tokensToTrain"]) {
      if (!(i[name] > 0)) return `“${LABELS[name]}” must be above 0.`;
    }
    if (!(i.latency >= 0)) return `“${LABELS.latency}” must be 0 or more.`;
    if (i.price !== null && !(i.price >= 0)) return `“${LABELS.price}” must be 0 or more, or empty.`;
    if (!(i.gpu in GPUS)) return `Unknown GPU ${i.gpu}.`;
    if (GPUS[i.gpu][PEAK_OF[i.precision]] === null) {
      return `The ${i.gpu} has no bfloat16: choose float16 autocast or float32.`;
    }
    return null;
  }

  // Everything the page shows, from its inputs in the form's units (utils.sizing.calculate);
  // an error message instead where an input is wrong (never a NaN).
  function calculate(i) {
    const message = problem(i);
    if (message) return { error: message };
    const valueBytes = i.precision === "fp32" ? 4 : 2;
    let parameters, flopsPerExample, activationBytes, tokens;
    if (i.kind === "transformer") {
      parameters = transformerParameters(i);
      flopsPerExample = transformerFlopsPerToken(i) * i.context;
      activationBytes = i.batch * valueBytes * transformerActivationValues(i);
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
    const free = 1 - i.margin / 100;
    const fits = {};
    for (const [name, gpu] of Object.entries(GPUS)) fits[name] = total <= free * gpu.memory_gb * 1e9;
    const room = free * GPUS[i.gpu].memory_gb * 1e9 - activationBytes;
    const states = parameters * Object.values(BYTES_PER_PARAMETER[i.precision + "|" + i.optimizer])
      .reduce((a, b) => a + b, 0);
    const peak = GPUS[i.gpu][PEAK_OF[i.precision]];
    const sent = allReduceBytes(parameters, i.stage, i.precision);
    const [bandwidth, bound] = ringBandwidth(i.gpus, i.gpusPerMachine, i.busBandwidth * 1e9,
      i.network / 8 * 1e9);
    const step = stepTime(flopsPerExample, i.batch, i.gpus, peak, i.mfu / 100, sent, bandwidth,
      i.latency * 1e-6, i.kind === "transformer" && i.recompute, i.accumulation);
    const perGpu = i.batch * i.accumulation * tokens;
    const steps = Math.ceil(i.tokensToTrain / (perGpu * i.gpus));
    const hours = steps * step.step_s / 3600;
    const finite = [parameters, total, step.compute_s, step.communication_s, step.step_s, hours];
    if (!finite.every(Number.isFinite) || !(step.step_s > 0)) {
      return { error: "These numbers are too large or too small to compute: check each field." };
    }
    const share = room > 0 ? states / room : Infinity;
    return {
      parameters, memory, total, fits,
      fsdpGpus: Number.isFinite(share) ? Math.max(1, Math.ceil(share)) : null,
      step,
      machines: Math.ceil(i.gpus / i.gpusPerMachine),
      bandwidth,
      bound: i.gpus > 1 ? bound : null,
      unitsPerSecond: perGpu / step.step_s,
      globalBatch: i.batch * i.accumulation * i.gpus,
      tokensPerStep: perGpu * i.gpus,
      steps, hours,
      gpuHours: hours * i.gpus,
      cost: i.price === null ? null : hours * i.gpus * i.price,
      flopsPerUnit: flopsPerExample / tokens,
      unit: i.kind === "transformer" ? "tokens" : "examples",
    };
  }

  function readInputs(root) {
    const i = {};
    for (const [name, , type] of FIELDS) {
      const element = root.querySelector(`[name="${name}"]`);
      if (type === "checkbox") i[name] = element.checked;
      else if (type === "number") i[name] = element.value === "" ? NaN : Number(element.value);
      else i[name] = element.value;
    }
    if (Number.isNaN(i.price) && root.querySelector('[name="price"]').value === "") {
      i.price = null;
    }
    return i;
  }

  const fmt = (x, digits = 3) => x.toLocaleString("en", { maximumSignificantDigits: digits });
  const whole = (x) => Math.round(x).toLocaleString("en");
  // 3 digits, in words past a million: "444 billion".
  function large(x) {
    for (const [size, name] of [[1e12, "trillion"], [1e9, "billion"], [1e6, "million"]]) {
      if (x >= size) return `${fmt(x / size)} ${name}`;
    }
    return fmt(x);
  }
  function duration(hours) {
    if (hours < 1 / 60) return `${fmt(hours * 3600)} s`;
    if (hours < 1) return `${fmt(hours * 60)} min`;
    if (hours < 72) return `${fmt(hours)} h`;
    return `${large(hours / 24)} days`;
  }
  const link = (label, url) => `<a href="${url}">${label}</a>`;
  const an = (name) => (/^[AEFHILMNORSX]/.test(name) ? "an " : "a ") + name;  // an H100, a T4
  // The colours of the memory bar and of the swatches that name its parts (both themes).
  const COLORS = { "weights": "#4e79a7", "gradients": "#f28e2b", "optimizer state": "#59a14f",
    "DDP's buckets": "#edc948", "activations": "#b07aa1" };
  const swatch = (kind) => `<span class="calculator-swatch" style="background:${COLORS[kind]}"></span>`;

  // One GPU's memory as a stacked bar, against the chosen GPU's memory less the margin.
  function bar(result, i, size, unitName) {
    const capacity = GPUS[i.gpu].memory_gb * 1e9;
    const scale = Math.max(result.total, capacity);
    const parts = Object.entries(result.memory).filter(([, bytes]) => bytes > 0).map(
      ([kind, bytes]) => `<span style="width:${100 * bytes / scale}%;background:${COLORS[kind]}"
        title="${kind}: ${size(bytes)} ${unitName}"></span>`);
    const usable = (1 - i.margin / 100) * capacity;
    const label = Object.entries(result.memory).map(([k, b]) => `${k} ${size(b)}`).join(", ");
    return `<div class="calculator-bar" role="img" aria-label="${label} ${unitName}; usable
      ${size(usable)}">${parts.join("")}<i style="left:${100 * usable / scale}%"></i></div>`;
  }

  // Where nothing fits: how many GPUs FSDP needs, or what splits the model itself.
  function whatFits(result, i, size, unitName) {
    const beyond = `tensor or pipeline parallelism
      (${link("beyond data parallelism", "beyond_data_parallelism.html")})`;
    if (result.fsdpGpus !== null) {
      return `Nothing fits one GPU as set. FSDP fits it on
        <b data-fsdp-gpus="${result.fsdpGpus}">${whole(result.fsdpGpus)}</b> or more ${i.gpu}
        GPUs; ${beyond} splits the model itself.`;
    }
    return `Nothing fits one GPU as set, and the activations alone
      (${size(result.memory.activations)} ${unitName}) fill ${an(i.gpu)}: recompute them, take a
      smaller batch, or split the model itself with ${beyond}.`;
  }

  // The MFU's source: the row it was measured in, or the default's.
  function mfuNote(root, i) {
    const preset = PRESETS[root.querySelector('[name="preset"]').value];
    if (preset && i.mfu === preset.mfu && preset.measured) {
      const m = preset.measured;
      const where = `<code>${EVIDENCE.split("/").pop()}</code>, row “${m.row}”`;
      if (m.gpu === i.gpu && m.precision === i.precision) {
        return `Measured on one ${m.gpu} (${where}).`;
      }
      return `Measured on one ${m.gpu} in ${OPTIONS[m.precision]} (${where}): expect another `
        + "share here.";
    }
    const runs = `${link("PaLM", "https://arxiv.org/abs/2204.02311")} 46.2%, `
      + `${link("Llama 3 405B", "https://arxiv.org/abs/2407.21783")} 38-43%`;
    if (preset && i.mfu === preset.mfu) {
      return `The book's default for large models, as tuned large runs report (${runs}).`;
    }
    return `Your value. Tuned large runs report about ${DEFAULT_MFU}% (${runs}).`;
  }

  function render(root) {
    const out = root.querySelector(".calculator-output");
    const summary = root.querySelector(".calculator-summary");
    const inputs = readInputs(root);
    root.querySelector('[data-note="mfu"]').innerHTML = mfuNote(root, inputs);
    const result = calculate(inputs);
    if (result.error) {
      out.innerHTML = `<p class="calculator-error" role="alert">${result.error}</p>`;
      summary.hidden = true;
      summary.innerHTML = "";
      return;
    }
    const [unitName, unitSize] = result.total < 1e9 ? ["MB", 1e6] : ["GB", 1e9];
    const size = (bytes) => fmt(bytes / unitSize);
    const fitsHere = result.fits[inputs.gpu];
    const usable = (1 - inputs.margin / 100) * GPUS[inputs.gpu].memory_gb * 1e9;
    summary.hidden = false;
    const bytes = (x) => (x < 1e9 ? `${fmt(x / 1e6)} MB` : `${fmt(x / 1e9)} GB`);
    summary.innerHTML = `${bar(result, inputs, size, unitName)}
      <p>Per GPU ${bytes(result.total)} of the ${bytes(usable)} usable on ${an(inputs.gpu)}: <b data-fits-here="${fitsHere}">${fitsHere ? "fits" : "does not fit"}</b>
      · ${whole(result.unitsPerSecond)} ${result.unit} per second · ${duration(result.hours)}
      to train</p>`;
    const nothingFits = Object.values(result.fits).every((ok) => !ok)
      ? `<p class="calculator-nothing-fits">${whatFits(result, inputs, size, unitName)}</p>` : "";
    const rows = Object.entries(result.memory).map(([kind, bytes]) =>
      `<tr><td>${swatch(kind)}${kind}</td><td data-bytes="${bytes}">${size(bytes)}</td></tr>`);
    const fits = Object.entries(result.fits).map(([name, ok]) =>
      `<tr><td>${name} (${GPUS[name].memory_gb} GB)</td><td data-fits="${ok}">${ok ? "fits" : "does not fit"}</td></tr>`);
    const s = result.step;
    const ms = (x) => fmt(x * 1e3);
    const unit = result.unit;
    const tokensPerStep = unit === "tokens"
      ? `<tr><td>tokens a step</td><td>${whole(result.tokensPerStep)}</td></tr>` : "";
    const cost = result.cost === null ? ""
      : `<tr><td><b>cost</b></td><td data-cost="${result.cost}"><b>${large(result.cost)}</b></td></tr>`;
    let ring;
    if (result.bound === null) ring = "One GPU: nothing to all-reduce.";
    else {
      ring = `The all-reduce's ring runs at ${fmt(result.bandwidth / 1e9)} GB/s, bounded by
        the link <b data-bound="${result.bound}">${result.bound}</b>${result.machines > 1
        ? ` (${result.machines} machines)` : ""}; it ${s.hidden ? "hides behind" : "does not hide behind"}
        the backward pass.`;
    }
    out.innerHTML = `
      <p>${whole(result.parameters)} parameters; ${large(result.flopsPerUnit)} operations per
      ${unit === "tokens" ? "token" : "example"} in a training step.</p>
      <table class="calculator-memory"><thead><tr><th>per GPU</th><th>${unitName}</th></tr></thead>
      <tbody>${rows.join("")}<tr><td><b>total</b></td><td data-bytes="${result.total}"><b>${size(result.total)}</b></td></tr></tbody></table>
      <table class="calculator-fits"><thead><tr><th>GPU</th><th>one GPU's share</th></tr></thead>
      <tbody>${fits.join("")}</tbody></table>${nothingFits}
      <table class="calculator-step"><thead><tr><th>a step</th><th>ms</th></tr></thead><tbody>
      <tr><td>compute</td><td data-seconds="${s.compute_s}">${ms(s.compute_s)}</td></tr>
      <tr><td>gradients' all-reduce (ring)</td><td data-seconds="${s.communication_s}">${ms(s.communication_s)}</td></tr>
      <tr><td>the step, with what does not hide</td><td data-seconds="${s.step_s}">${ms(s.step_s)}</td></tr>
      </tbody></table>
      <p data-hidden="${s.hidden}">${ring} About
      <b data-units-per-second="${result.unitsPerSecond}">${whole(result.unitsPerSecond)}</b>
      ${unit} per second per GPU.</p>
      <table class="calculator-time"><thead><tr><th>to train</th><th></th></tr></thead><tbody>
      <tr><td>global batch</td><td>${whole(result.globalBatch)}</td></tr>${tokensPerStep}
      <tr><td>steps</td><td>${whole(result.steps)}</td></tr>
      <tr><td>time</td><td data-hours="${result.hours}">${duration(result.hours)}</td></tr>
      <tr><td>GPU-hours</td><td data-gpu-hours="${result.gpuHours}">${large(result.gpuHours)}</td></tr>
      ${cost}</tbody></table>`;
  }

  function applyPreset(root) {
    const preset = PRESETS[root.querySelector('[name="preset"]').value];
    if (!preset) return;
    for (const [name, value] of Object.entries(preset)) {
      const input = root.querySelector(`[name="${name}"]`);
      if (!input) continue;
      if (input.type === "checkbox") input.checked = value;
      else input.value = value;
    }
    showKind(root);
  }

  function showKind(root) {
    const transformer = root.querySelector('[name="kind"]').value === "transformer";
    for (const name of [...SHAPE, "recompute"]) {
      root.querySelector(`[name="${name}"]`).closest("label").hidden = !transformer;
    }
    for (const name of ANY) {
      root.querySelector(`[name="${name}"]`).closest("label").hidden = transformer;
    }
  }

  function build(root) {
    const form = document.createElement("form");
    form.className = "calculator-form";
    let group;
    for (const [name, label, type, options, initial] of FIELDS) {
      if (GROUPS[name]) {
        const fieldset = form.appendChild(document.createElement("fieldset"));
        fieldset.appendChild(document.createElement("legend")).textContent = GROUPS[name];
        group = fieldset.appendChild(document.createElement("div"));
        group.className = "calculator-fields";
      }
      const wrap = document.createElement("label");
      wrap.textContent = label + " ";
      let input;
      if (type === "select") {
        input = document.createElement("select");
        for (const option of options) input.add(new Option(OPTIONS[option] || option, option));
      } else {
        input = document.createElement("input");
        input.type = type;
        if (type === "number") input.step = "any";
      }
      input.name = name;
      if (initial !== undefined) input.value = initial;
      wrap.appendChild(input);
      if (name === "mfu" || NOTES[name]) {
        const note = document.createElement("small");
        note.className = "calculator-note";
        note.dataset.note = name;
        note.innerHTML = NOTES[name] || "";
        wrap.appendChild(note);
      }
      group.appendChild(wrap);
    }
    form.querySelector('[name="preset"]').value = "The recipes' transformer (3.3 M)";
    const summary = document.createElement("div");  // the answer, in view while editing
    summary.className = "calculator-summary";
    const output = document.createElement("div");
    output.className = "calculator-output";
    output.setAttribute("aria-live", "polite");
    root.replaceChildren(form, summary, output);
    applyPreset(root);
    form.addEventListener("input", (event) => {
      const name = event.target.name;
      if (name === "preset") applyPreset(root);
      else if (name === "kind") showKind(root);
      if ([...SHAPE, ...ANY, "kind"].includes(name)) {
        root.querySelector('[name="preset"]').value = "your own";
      }
      render(root);
    });
    form.addEventListener("submit", (event) => event.preventDefault());
    render(root);
  }

  window.bookCalculator = { calculate, problem, PRESETS, GPUS, LABELS };
  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("gpu-calculator");
    if (root) build(root);
  });
})();
