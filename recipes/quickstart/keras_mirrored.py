"""Keras `fit` on every GPU of this machine, with MirroredStrategy:

    python keras_mirrored.py [--epochs 5]

With no GPU, it splits the CPU into two logical devices: the same program, simulated.
"""

import argparse

import keras
import tensorflow as tf
from sklearn.datasets import load_digits

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
args = parser.parse_args()

gpus = tf.config.list_physical_devices("GPU")
if not gpus:  # two logical CPUs, set before TensorFlow starts its runtime
    cpu = tf.config.list_physical_devices("CPU")[0]
    logical = [tf.config.LogicalDeviceConfiguration()] * 2
    tf.config.set_logical_device_configuration(cpu, logical)
strategy = tf.distribute.MirroredStrategy()  # every GPU, or the two logical CPUs
devices = strategy.num_replicas_in_sync
global_batch = 32 * devices  # each device takes its share of a batch

digits = load_digits()  # 1,797 images of 8 x 8 pixels, shipped with scikit-learn
images, labels = (digits.images[..., None] / 16).astype("float32"), digits.target
train = tf.data.Dataset.from_tensor_slices((images[:1500], labels[:1500]))
train = train.shuffle(1500, seed=0).batch(global_batch, drop_remainder=True)
test = tf.data.Dataset.from_tensor_slices((images[1500:], labels[1500:]))
test = test.batch(global_batch)  # a first batch that splits over every device

keras.utils.set_random_seed(0)
with strategy.scope():  # variables created here are mirrored on every device
    model = keras.Sequential(
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
# shuffle=False: the dataset shuffles itself, anew each epoch (fit cannot shuffle it)
history = model.fit(train, epochs=args.epochs, shuffle=False, verbose=0)
for epoch, loss in enumerate(history.history["loss"], 1):
    print(f"epoch {epoch}: loss {loss:.3f}")
_, accuracy = model.evaluate(test, verbose=0)
kind = "GPU" if gpus else "CPU"
print(f"{devices} x {kind}, global batch {global_batch}: test accuracy {accuracy:.3f}")
