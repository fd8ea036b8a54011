# Learner answers to lesson 04's exercise 1, "Add the missing wait" (al.check("04.event_wait_fix", handoff)),
# each cell as typed after the notebook's set-up; run by tests/answers.py, verdicts checked by tests/test_answers.py.

# %% right: the published fix, an event made inside the function, consumer.wait_event
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: an event made once at top level, recorded on the producer by name, reused across two checks
done = torch.cuda.Event()

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    done.record(producer)
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)
al.check("04.event_wait_fix", handoff)

# %% right: an event made lazily on the first call, kept in a global, checked twice
_done = None

def handoff(producer, consumer, make, use):
    global _done
    if _done is None:
        _done = torch.cuda.Event()
    with torch.cuda.stream(producer):
        x = make()
        _done.record()
    with torch.cuda.stream(consumer):
        torch.cuda.current_stream().wait_event(_done)
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)
al.check("04.event_wait_fix", handoff)

# %% right: e.wait(consumer), the event's side of the same call
def handoff(producer, consumer, make, use):
    ready = torch.cuda.Event()
    with torch.cuda.stream(producer):
        x = make()
    ready.record(producer)
    ready.wait(consumer)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: e.wait() with no argument, inside the consumer's block (the current stream waits)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        ready = torch.cuda.Event()
        ready.record()
    with torch.cuda.stream(consumer):
        ready.wait()
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: consumer.wait_stream(producer), an event recorded and waited for in one call
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: wait_stream on the current stream, each inside its own block
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    with torch.cuda.stream(consumer):
        torch.cuda.current_stream().wait_stream(producer)
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: producer.record_event() makes and records the event
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    made = producer.record_event()
    consumer.wait_event(made)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: a top-level event passed to record_event, and current_stream().record_event inside the block, checked twice
made = torch.cuda.Event()

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        torch.cuda.current_stream().record_event(made)
    consumer.wait_event(made)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)
al.check("04.event_wait_fix", handoff)

# %% right: torch.cuda.set_stream instead of with-blocks, the caller's stream put back at the end
def handoff(producer, consumer, make, use):
    before = torch.cuda.current_stream()
    torch.cuda.set_stream(producer)
    x = make()
    done = torch.cuda.Event()
    done.record()
    torch.cuda.set_stream(consumer)
    consumer.wait_event(done)
    y = use(x)
    torch.cuda.set_stream(before)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: torch.cuda.StreamContext spelled out
def handoff(producer, consumer, make, use):
    done = torch.cuda.Event()
    with torch.cuda.StreamContext(producer):
        x = make()
        done.record()
    with torch.cuda.StreamContext(consumer):
        consumer.wait_event(done)
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: inside torch.cuda.device(torch.cuda.current_device()), the event recorded on the producer
def handoff(producer, consumer, make, use):
    with torch.cuda.device(torch.cuda.current_device()):
        done = torch.cuda.Event()
        with torch.cuda.stream(producer):
            x = make()
        done.record(producer)
        consumer.wait_event(done)
        with torch.cuda.stream(consumer):
            y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: torch.cuda.device(producer.device) around both blocks, and the streams' own device
def handoff(producer, consumer, make, use):
    with torch.cuda.device(producer.device):
        with torch.cuda.stream(producer):
            x = make()
            done = producer.record_event()
        with torch.cuda.stream(consumer):
            consumer.wait_event(done)
            return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: torch.cuda.Event(blocking=True) (blocking changes only how a host waits; nothing here does)
def handoff(producer, consumer, make, use):
    done = torch.cuda.Event(blocking=True)
    with torch.cuda.stream(producer):
        x = make()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: a timing event (enable_timing=True) orders just as well
def handoff(producer, consumer, make, use):
    done = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(producer):
        x = make()
        done.record(producer)
    with torch.cuda.stream(consumer):
        consumer.wait_event(done)
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: both streams in one with-statement after the wait is queued
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    ev = torch.cuda.Event()
    ev.record(producer)
    consumer.wait_event(ev)
    with torch.cuda.device(0), torch.cuda.stream(consumer):
        out = use(x)
    return out

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": no wait at all (the starter code)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the event recorded before make(), so it completes at once
def handoff(producer, consumer, make, use):
    done = torch.cuda.Event()
    with torch.cuda.stream(producer):
        done.record()
        x = make()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the consumer waits before the event is recorded (a wait on an unrecorded event is no wait)
def handoff(producer, consumer, make, use):
    done = torch.cuda.Event()
    consumer.wait_event(done)
    with torch.cuda.stream(producer):
        x = make()
        done.record()
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the producer waits for its own event, the consumer for nothing
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    producer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the current (default) stream waits, outside the consumer's block
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    torch.cuda.current_stream().wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": wait_stream the wrong way round
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    producer.wait_stream(consumer)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the event recorded after make() but on the default stream, outside the producer's block
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    done = torch.cuda.Event()
    done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the event recorded on the consumer, which has nothing to wait for
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    with torch.cuda.stream(consumer):
        done = consumer.record_event()
        consumer.wait_event(done)
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": torch.cuda.synchronize() (right values, the host blocked)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    torch.cuda.synchronize()
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": done.synchronize() (right values, the host blocked)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    done.synchronize()
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": producer.synchronize(), checked twice
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    producer.synchronize()
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)
al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": a blocking=True event, synchronized on (the host sleeps instead of spinning, but still waits)
done = torch.cuda.Event(blocking=True)

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done.record()
    done.synchronize()
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": the host polls the event until it completes
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    while not done.query():
        pass
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": the right wait, and a synchronize on the current stream inside the producer's block too
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        torch.cuda.current_stream().synchronize()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "call use(x) once, inside": use(x) run on the producer's stream
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "call use(x) once, inside": the wait is there, but use(x) runs on the default stream
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "call make() once, inside": make() called outside the producer's block
def handoff(producer, consumer, make, use):
    x = make()
    done = torch.cuda.Event()
    done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "call make() once, inside": make() called twice (once to warm up)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        make()
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "return use(x)'s result": the right wait, but nothing returned
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)

al.check("04.event_wait_fix", handoff)

# %% right: a callable object with a helper that hands an event from one stream to another
class Handoff:
    @staticmethod
    def fence(after, before):
        done = torch.cuda.Event()
        done.record(after)
        before.wait_event(done)

    def __call__(self, producer, consumer, make, use):
        with torch.cuda.stream(producer):
            x = make()
        self.fence(producer, consumer)
        with torch.cuda.stream(consumer):
            return use(x)

handoff = Handoff()
al.check("04.event_wait_fix", handoff)

# %% right: contextlib.ExitStack for the stream blocks, the event passed to wait_event by keyword-free call
import contextlib

def handoff(producer, consumer, make, use):
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.cuda.stream(producer))
        x = make()
        ready = torch.cuda.current_stream().record_event()
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.cuda.stream(consumer))
        torch.cuda.current_stream().wait_event(ready)
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: the wait queued only when the event has not completed yet (one query: the host does not wait)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    if not done.query():  # already done? then there is nothing to wait for
        consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% raises "use() takes the tensor make() returned": use() given x.detach(), a new tensor object, not the one make() returned
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x.detach())

al.check("04.event_wait_fix", handoff)

# %% raises "CUDA error: invalid argument": an interprocess event with timing (CUDA refuses to create it)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event(enable_timing=True, interprocess=True)
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": the right wait, then a sleep "to be safe" (the host sits out the spin)
import time

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        y = use(x)
    time.sleep(0.1)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the consumer waits for the current (default) stream, not the producer
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": one event recorded twice, the second time on the consumer, before the wait
def handoff(producer, consumer, make, use):
    done = torch.cuda.Event()
    with torch.cuda.stream(producer):
        x = make()
        done.record()
    done.record(consumer)  # "mark the consumer too" overwrites the producer's record
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": gaming: prints "Right:" after a synchronize
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    torch.cuda.synchronize()
    print("Right: the consumer's stream waited for the producer's event on the GPU, and the host went on.")
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)
