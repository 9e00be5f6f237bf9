"""Where the device worker threads' execution samples fall, from `jfr print --json --stack-depth 80`."""
import json, collections, sys
events = json.load(open(sys.argv[1]))['recording']['events']
buckets = [
    ("response JSON encoding (ResponseEncoder.encode)", "ResponseEncoder.encode"),
    ("padded batch inputs (BertBatching.runPadded, own code)", None),
    ("forward: ExecutionPlan.run (pool, launches, sync, copies)", "ExecutionPlan.run"),
    ("answering: Reactor/WebFlux after sink.success", "BatchQueue.lambda$launch"),
    ("batch formation (BatchQueue.form)", "BatchQueue.form"),
]
count = collections.Counter(); total = 0
for e in events:
    if e['type'] != 'jdk.ExecutionSample' or not e['values']['sampledThread']['javaName'].startswith('gpupool-dev'):
        continue
    total += 1
    frames = [f['method']['type']['name'].split('/')[-1] + '.' + f['method']['name'] for f in e['values']['stackTrace']['frames']]
    text = ' '.join(frames)
    if 'ResponseEncoder.encode' in text: key = buckets[0][0]
    elif 'ExecutionPlan.run' in text: key = buckets[2][0]
    elif 'BertBatching.runPadded' in text: key = buckets[1][0]
    elif 'BatchQueue.form' in text: key = buckets[4][0]
    elif 'DeviceWorker$Job.lambda$run' in text or 'BatchQueue.lambda$launch' in text or 'BatchQueue.lambda$run' in text: key = buckets[3][0]
    elif 'InferenceService.run' in text: key = "request alone: InferenceService.run other"
    else: key = "other (" + frames[0] + ")"
    count[key] += 1
print("worker-thread execution samples:", total)
for k, v in count.most_common(12):
    print("%5d  %5.1f %%  %s" % (v, 100.0 * v / total, k))
