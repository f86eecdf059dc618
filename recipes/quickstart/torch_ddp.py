"""PyTorch DDP on every GPU of this machine, one process per GPU:
    torchrun --standalone --nproc_per_node=gpu torch_ddp.py [--epochs 5]
Without GPUs (--nproc_per_node=2), it trains on the CPU, over gloo."""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
args = parser.parse_args()
if "LOCAL_RANK" not in os.environ:  # torchrun tells every process who it is
    sys.exit("Start it with torchrun: torchrun --nproc_per_node=2 torch_ddp.py")
local_rank, here = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
if torch.cuda.device_count() >= here:  # a GPU for every process on this machine
    device, backend = torch.device("cuda", local_rank), "nccl"
    torch.cuda.set_device(device)
else:
    device, backend = torch.device("cpu"), "gloo"
    if torch.cuda.is_available() and local_rank == 0:  # the GPUs would sit idle
        print(f"More processes ({here}) than GPUs: all of them train on the CPU")
dist.init_process_group(backend)
rank, processes = dist.get_rank(), dist.get_world_size()
digits = load_digits()  # 1,797 images of 8 x 8 pixels, shipped with scikit-learn
images = torch.tensor(digits.images[:, None] / 16, dtype=torch.float32)
labels = torch.tensor(digits.target)
train = TensorDataset(images[:1500], labels[:1500])
sampler = DistributedSampler(train, shuffle=True, seed=0)  # each process its share
loader = DataLoader(train, batch_size=32, sampler=sampler)  # 32 a process and step
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Flatten(), nn.Linear(1152, 10))
model = DistributedDataParallel(model.to(device))  # averages gradients over processes
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * processes, momentum=0.9)
for epoch in range(1, args.epochs + 1):
    sampler.set_epoch(epoch)  # a new order every epoch, the same on every process
    loss_sum = torch.zeros((), device=device)  # over this process's examples
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients during the backward pass
        optimizer.step()
        loss_sum += loss.detach() * len(y)
    dist.all_reduce(loss_sum)  # summed over every process
    if rank == 0:  # each process had len(sampler) examples (a few twice, if need be)
        print(f"epoch {epoch}: loss {loss_sum / (len(sampler) * processes):.3f}")
if rank == 0:  # the test digits, on rank 0 alone: not through DDP
    right = model.module(images[1500:].to(device)).argmax(1).cpu() == labels[1500:]
    accuracy = right.float().mean()
    print(f"{processes} processes on {device.type}: test accuracy {accuracy:.3f}")
dist.destroy_process_group()
sys.stdout.flush()  # then leave at once: in Python's teardown, a gloo thread freeing
os._exit(0)  # a finished collective can abort the process (pytorch/pytorch#117762)
