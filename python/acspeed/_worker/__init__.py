"""The tuner's side of acspeed, private: the trial worker `acspeed-tune` launches under torchrun
(worker.py; its module name is tuner/src/worker_module.h's), the batches it trains on and the
JSON-lines protocol it speaks. Nothing here is imported by `import acspeed`."""
