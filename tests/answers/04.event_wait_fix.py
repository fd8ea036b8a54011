# Learner answers to lesson 04's exercise 1, "Add the missing wait" (al.check("04.event_wait_fix", handoff)),
# each cell as typed after the notebook's set-up; run by tests/answers.py, verdicts checked by tests/grading/test_answers.py.

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

# %% right: a closure factory that makes its event once, checked twice
def make_handoff():
    done = torch.cuda.Event()

    def handoff(producer, consumer, make, use):
        with torch.cuda.stream(producer):
            x = make()
            done.record()
        consumer.wait_event(done)
        with torch.cuda.stream(consumer):
            return use(x)

    return handoff

handoff = make_handoff()
al.check("04.event_wait_fix", handoff)
al.check("04.event_wait_fix", handoff)

# %% right: functools.partial binds the event class to a general helper
import functools

def handoff_with(event_cls, producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    ev = event_cls()
    ev.record(producer)
    ev.wait(consumer)
    with torch.cuda.stream(consumer):
        return use(x)

handoff = functools.partial(handoff_with, torch.cuda.Event)
al.check("04.event_wait_fix", handoff)

# %% right: the streams' own context managers (with producer: / with consumer:)
def handoff(producer, consumer, make, use):
    with producer:
        x = make()
        done = producer.record_event()
    with consumer:
        consumer.wait_event(done)
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: a relay stream of high priority (priority=-1) between producer and consumer
def handoff(producer, consumer, make, use):
    relay = torch.cuda.Stream(priority=-1)
    with torch.cuda.stream(producer):
        x = make()
    relay.wait_stream(producer)
    consumer.wait_stream(relay)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: the default stream as a relay: it waits for the producer, the consumer waits for it
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    main = torch.cuda.current_stream()
    main.wait_stream(producer)
    consumer.wait_stream(main)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: torch.cuda.synchronize() at the start, while nothing is queued yet, then the event wait
def handoff(producer, consumer, make, use):
    torch.cuda.synchronize()  # start from a quiet GPU
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: one event recorded on the producer, waited for, then re-recorded on the consumer after use (the queued wait keeps the first record)
def handoff(producer, consumer, make, use):
    ev = torch.cuda.Event()
    with torch.cuda.stream(producer):
        x = make()
    ev.record(producer)
    consumer.wait_event(ev)
    with torch.cuda.stream(consumer):
        y = use(x)
    ev.record(consumer)  # reused as "consumer done" marker
    return y

al.check("04.event_wait_fix", handoff)

# %% right: consumer.wait_stream(current stream) issued from inside the producer's block
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        consumer.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: an interprocess event (no timing), recorded with the stream passed by keyword
def handoff(producer, consumer, make, use):
    done = torch.cuda.Event(interprocess=True)
    with torch.cuda.stream(producer):
        x = make()
    done.record(stream=producer)
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: events kept in a dict, wait_event called unbound on the Stream class, record_stream too
events = {}

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        events["made"] = torch.cuda.current_stream().record_event()
    torch.cuda.Stream.wait_event(consumer, events["made"])
    x.record_stream(consumer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: a dataclass that holds the streams, with a method per side
from dataclasses import dataclass

@dataclass
class Pipe:
    producer: object
    consumer: object

    def produce(self, make):
        with torch.cuda.stream(self.producer):
            x = make()
            ev = torch.cuda.Event(blocking=True, enable_timing=True)
            ev.record()
        return x, ev

    def consume(self, use, x, ev):
        self.consumer.wait_event(ev)
        with torch.cuda.stream(self.consumer):
            return use(x)

def handoff(producer, consumer, make, use):
    pipe = Pipe(producer, consumer)
    x, ev = pipe.produce(make)
    return pipe.consume(use, x, ev)

al.check("04.event_wait_fix", handoff)

# %% right: torch.cuda.stream(None) (a no-op block) around the wait, then the consumer's block
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    with torch.cuda.stream(None):
        consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: torch.Event (the device-generic event of PyTorch 2.4+), recorded on the producer by name
def handoff(producer, consumer, make, use):
    done = torch.Event()
    with torch.cuda.stream(producer):
        x = make()
    done.record(producer)
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: torch.Event recorded with no argument inside the producer's block, waited for with event.wait(consumer)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.Event()
        done.record()
    done.wait(consumer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)


# %% wrong "read x before make() had written it": torch.Event recorded on the producer before make()
def handoff(producer, consumer, make, use):
    done = torch.Event()
    done.record(producer)
    with torch.cuda.stream(producer):
        x = make()
    done.wait(consumer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)


# %% right: the consumer waits for an event, and a daemon thread holds x until the producer's event completes
import threading

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    with torch.cuda.stream(consumer):
        out = use(x)
    threading.Thread(target=lambda: (done.synchronize(), x), daemon=True).start()
    return out

al.check("04.event_wait_fix", handoff)

# %% wrong "host waited for the producer": the event is synchronized in a thread, which the caller joins
import threading

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    waiter = threading.Thread(target=done.synchronize)
    waiter.start()
    waiter.join()
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: torch.accelerator.set_stream to switch streams, the caller's stream put back
def handoff(producer, consumer, make, use):
    before = torch.accelerator.current_stream()
    torch.accelerator.set_stream(producer)
    x = make()
    done = producer.record_event()
    torch.accelerator.set_stream(consumer)
    consumer.wait_event(done)
    y = use(x)
    torch.accelerator.set_stream(before)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: use() given x.contiguous() (x is contiguous: PyTorch returns the same tensor)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        return use(x.contiguous())

al.check("04.event_wait_fix", handoff)

# %% right: a peek at x[0] on the default stream after queuing the wait (reads x unsynchronized, stale, the host does not wait)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        y = use(x)
    print("x[0] right now:", float(x[0]))
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited": gaming: a synchronize, then the producer's query() replaced so the host seems to have gone on
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    torch.cuda.synchronize()
    producer.query = lambda: False
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: gaming: a synchronize, then a long spin queued on the producer so that it still looks busy
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(200_000_000)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": consumer.wait_stream(producer) queued before make() is
def handoff(producer, consumer, make, use):
    consumer.wait_stream(producer)  # "set up the dependency first"
    with torch.cuda.stream(producer):
        x = make()
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": x.record_stream(consumer) instead of a wait (it only tells the allocator)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    x.record_stream(consumer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": the consumer waits for a fresh event that was never recorded
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        torch.cuda.Event().record()
    consumer.wait_event(torch.cuda.Event())
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": a fence helper called with its arguments swapped
def fence(after, before):
    """`before` waits for everything queued so far on `after`."""
    ev = torch.cuda.Event()
    ev.record(after)
    before.wait_event(ev)

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    fence(consumer, producer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "read x before make() had written it": a relay stream that waits for the producer before make() is queued
relay = torch.cuda.Stream()

def handoff(producer, consumer, make, use):
    relay.wait_stream(producer)
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(relay)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": consumer.synchronize() after use, "to be sure y is ready"
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        y = use(x)
    consumer.synchronize()
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": a debug print of y inside the consumer's block (the read waits for the consumer, which waits for the producer)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = producer.record_event()
    with torch.cuda.stream(consumer):
        consumer.wait_event(done)
        y = use(x)
        print("y:", y)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": the default stream waits for the producer, and is synchronized "because it is cheap"
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    torch.cuda.default_stream().wait_stream(producer)
    torch.cuda.default_stream().synchronize()
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": the host polls the event with short sleeps
import time

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    while not done.query():
        time.sleep(0.0005)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "the host waited for the producer": the right wait, then torch.cuda.synchronize() before returning
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        y = use(x)
    torch.cuda.synchronize()
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "call use(x) once, inside": use(x) also called on the producer "to check it"
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        use(x)
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% wrong "return use(x)'s result": returns (x, y)
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    with torch.cuda.stream(consumer):
        y = use(x)
    return x, y

al.check("04.event_wait_fix", handoff)

# %% right: make() run in a worker thread that opens the producer's block itself (each thread has its own current stream)
import threading

def handoff(producer, consumer, make, use):
    made = []

    def produce():
        with torch.cuda.stream(producer):
            made.append(make())

    worker = threading.Thread(target=produce)
    worker.start()
    worker.join()
    consumer.wait_event(producer.record_event())
    with torch.cuda.stream(consumer):
        return use(made[0])

al.check("04.event_wait_fix", handoff)

# %% wrong "call make() once, inside": make() run in a worker thread started inside the producer's block (a new thread starts on the default stream)
import threading

def handoff(producer, consumer, make, use):
    made = []
    with torch.cuda.stream(producer):
        worker = threading.Thread(target=lambda: made.append(make()))
        worker.start()
        worker.join()
    consumer.wait_event(producer.record_event())
    with torch.cuda.stream(consumer):
        return use(made[0])

al.check("04.event_wait_fix", handoff)

# %% right: the producer's record_event(), handed to consumer.wait_event
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    ready = producer.record_event()
    consumer.wait_event(ready)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% right: the wait queued inside the consumer's block, through current_stream(), before use
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        ev = torch.cuda.Event()
        ev.record()
    with torch.cuda.stream(consumer):
        torch.cuda.current_stream().wait_event(ev)
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong: the event is recorded after the producer's block, on the caller's stream, not the producer's
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    ev = torch.cuda.Event()
    ev.record()
    consumer.wait_event(ev)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong: the event is recorded on the producer before make() queues its write
def handoff(producer, consumer, make, use):
    ev = torch.cuda.Event()
    with torch.cuda.stream(producer):
        ev.record()
        x = make()
    consumer.wait_event(ev)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong: the wait is queued after use(x) in the consumer's block
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        ev = producer.record_event()
    with torch.cuda.stream(consumer):
        y = use(x)
        consumer.wait_event(ev)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong: the caller's current stream waits (outside the consumer's block), not the consumer
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        ev = producer.record_event()
    torch.cuda.current_stream().wait_event(ev)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "host": the host polls query() in a busy loop before launching use
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        ev = producer.record_event()
    while not ev.query():
        pass
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "host": a worker thread waits on the event and launches use; the caller joins it
import threading

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        ev = producer.record_event()
    out = {}

    def consume():
        ev.synchronize()
        with torch.cuda.stream(consumer):
            out["y"] = use(x)

    t = threading.Thread(target=consume)
    t.start()
    t.join()
    return out["y"]

al.check("04.event_wait_fix", handoff)

# %% wrong "host": the consumer's launch goes through a thread pool whose job first waits for the producer stream
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(1)

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()

    def consume():
        producer.synchronize()
        with torch.cuda.stream(consumer):
            return use(x)

    return pool.submit(consume).result()

al.check("04.event_wait_fix", handoff)

# %% right: the consumer's launch from a worker thread, after consumer.wait_event in the caller's thread
import threading

def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        ev = producer.record_event()
    consumer.wait_event(ev)
    out = []

    def job():
        with torch.cuda.stream(consumer):
            out.append(use(x))

    t = threading.Thread(target=job)
    t.start()
    t.join()
    return out[0]

al.check("04.event_wait_fix", handoff)

# %% right: a blocking event (the flag only changes how a host wait sleeps; nothing here waits on the host)
def handoff(producer, consumer, make, use):
    ev = torch.cuda.Event(blocking=True)
    with torch.cuda.stream(producer):
        x = make()
        ev.record(producer)
    consumer.wait_event(ev)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% right: the wait, and record_stream for x read on the consumer's stream
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_stream(producer)
    x.record_stream(consumer)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong "host": x.cpu() to "make sure it is written" before the consumer runs
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        x.cpu()
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% wrong: the wait goes to the producer (which waits for the consumer), the wrong way round
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    producer.wait_stream(consumer)
    with torch.cuda.stream(consumer):
        y = use(x)
    return y

al.check("04.event_wait_fix", handoff)

# %% raises "'Event' object has no attribute 'synchronise'": a British spelling of synchronize, after the right wait
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
        done = torch.cuda.Event()
        done.record()
    consumer.wait_event(done)
    done.synchronise()
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)

# %% raises "'Stream' object has no attribute 'wait_steam'": wait_stream misspelt
def handoff(producer, consumer, make, use):
    with torch.cuda.stream(producer):
        x = make()
    consumer.wait_steam(producer)
    with torch.cuda.stream(consumer):
        return use(x)

al.check("04.event_wait_fix", handoff)
