"""Keras 3 on JAX, `fit` on every GPU of this machine, with keras.distribution:

    python keras_jax.py [--epochs 5]

With no GPU, JAX shows the CPU as two devices: the same program, simulated.
"""

import argparse
import os

os.environ["KERAS_BACKEND"] = "jax"  # before Keras is imported
# The CPU as two devices. It changes the CPU platform only: with a CUDA build of JAX and
# GPUs, the GPUs are the devices Keras uses.
flags = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count=2"

import keras  # noqa: E402 (after the backend is chosen)
from sklearn.datasets import load_digits  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
args = parser.parse_args()

found = keras.distribution.list_devices()  # ["gpu:0", ...], or ["cpu:0", "cpu:1"]
keras.distribution.set_distribution(keras.distribution.DataParallel())
devices, kind = len(found), found[0].split(":")[0].upper()
global_batch = 32 * devices  # each device takes its share of a batch

digits = load_digits()  # 1,797 images of 8 x 8 pixels, shipped with scikit-learn
images, labels = (digits.images[..., None] / 16).astype("float32"), digits.target
# a multiple of the devices, so that every batch, the last one too, splits evenly
train = slice(0, 1500 // devices * devices)
test = slice(1500, 1500 + 297 // devices * devices)

keras.utils.set_random_seed(0)
model = keras.Sequential(  # its variables are replicated on every device
    [
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ]
)
model.compile(
    optimizer=keras.optimizers.SGD(0.05 * devices, momentum=0.9),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
history = model.fit(
    images[train], labels[train], batch_size=global_batch, epochs=args.epochs, verbose=0
)
for epoch, loss in enumerate(history.history["loss"], 1):
    print(f"epoch {epoch}: loss {loss:.3f}")
_, accuracy = model.evaluate(
    images[test], labels[test], batch_size=global_batch, verbose=0
)
print(f"{devices} x {kind}, global batch {global_batch}: test accuracy {accuracy:.3f}")
