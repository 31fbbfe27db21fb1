package io.backplane.testkit;

import io.backplane.spi.BackendFactory;
import io.backplane.spi.config.ModelConfig;
import io.backplane.testkit.ToyBackend.Fault;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;

/**
 * Conformance tests of deliberately broken backends. Not run by surefire (the file name does not
 * match its patterns): {@link KitCatchesBrokenBackendsTest} runs them through EngineTestKit and
 * asserts that the kit fails them with the right message.
 */
final class BrokenBackends {
    private BrokenBackends() {
    }

    abstract static class Broken extends BackendConformanceTest {
        abstract Set<Fault> faults();

        ModelConfig config() {
            return ToyBackend.plain();
        }

        Set<Capability> declared() {
            return EnumSet.of(Capability.BATCHING, Capability.DECOUPLED_STREAMING, Capability.CANCELLATION);
        }

        @Override
        protected final BackendFactory backend() {
            return new ToyBackend(faults());
        }

        @Override
        protected final ConformanceModel model() {
            return ToyBackend.model(config());
        }

        @Override
        protected final Set<Capability> capabilities() {
            return declared();
        }

        @Override
        protected Duration answerTimeout() {
            return Duration.ofSeconds(3);
        }

        @Override
        protected Duration unloadTimeout() {
            return Duration.ofSeconds(1);
        }
    }

    static class DoubleFinal extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.DOUBLE_FINAL);
        }
    }

    static class SendAfterFinal extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.SEND_AFTER_FINAL);
        }

        @Override
        ModelConfig config() {
            return ToyBackend.decoupled();
        }
    }

    static class NoAnswer extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.NO_ANSWER);
        }
    }

    static class NeverEnds extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.NEVER_ENDS);
        }

        @Override
        ModelConfig config() {
            return ToyBackend.decoupled();
        }
    }

    static class WrongRouting extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.WRONG_ROUTING);
        }
    }

    static class LingersAfterFinal extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.LINGER_AFTER_FINAL);
        }
    }

    static class PoisonedAfterError extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.POISONED_AFTER_ERROR);
        }
    }

    static class FailsWholeBatch extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.FAIL_WHOLE_BATCH);
        }
    }

    static class ReloadFails extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.RELOAD_FAILS);
        }
    }

    static class LoadsOneAtATime extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.LOAD_NOT_CONCURRENT);
        }
    }

    static class LeaksThread extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.LEAK_THREAD);
        }
    }

    static class IgnoresCancellation extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.IGNORE_CANCEL);
        }
    }

    static class NeverReady extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.NOT_READY);
        }
    }

    static class CloseBlocks extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.CLOSE_BLOCKS);
        }
    }

    static class AnswersInline extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.ANSWER_INLINE);
        }

        @Override
        ModelConfig config() {
            return ToyBackend.decoupled();
        }
    }

    static class AcceptsUndeclaredGpu extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.of(Fault.ACCEPT_EVERYTHING);
        }
    }

    /** Declares no STREAMING although its model is decoupled. */
    static class UndeclaredStreaming extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.noneOf(Fault.class);
        }

        @Override
        ModelConfig config() {
            return ToyBackend.decoupled();
        }

        @Override
        Set<Capability> declared() {
            return EnumSet.of(Capability.BATCHING);
        }
    }

    /** Healthy, but declares neither STREAMING nor CANCELLATION: those checks must say why they do not run. */
    static class PlainOnly extends Broken {
        @Override
        Set<Fault> faults() {
            return EnumSet.noneOf(Fault.class);
        }

        @Override
        Set<Capability> declared() {
            return EnumSet.of(Capability.BATCHING);
        }
    }
}
