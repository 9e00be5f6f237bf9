package io.gpupool.memory;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class MemoryAdmissionTest {

    private final AtomicLong cap = new AtomicLong(100);
    private final AtomicLong inUse = new AtomicLong();
    private final MemoryAdmission admission = new MemoryAdmission("host:0", true, cap::get, inUse::get, b -> b);
    /** Charges of the requests in the order they were admitted. */
    private final List<Long> order = new ArrayList<>();

    private MemoryAdmission.Ticket acquire(long charge) {
        return admission.acquire(charge, ticket -> order.add(ticket.charge()));
    }

    @Test
    void requestsThatFitTogetherAreAdmittedAtOnceAndTheRestWaitsUntilRoomFrees() {
        MemoryAdmission.Ticket a = acquire(60);
        MemoryAdmission.Ticket b = acquire(40);
        MemoryAdmission.Ticket c = acquire(30);

        assertThat(order).containsExactly(60L, 40L);
        assertThat(admission.waiting()).isEqualTo(1);
        assertThat(admission.waitingBytes()).isEqualTo(30);
        assertThat(admission.admittedBytes()).isEqualTo(100);

        b.release();
        assertThat(order).containsExactly(60L, 40L, 30L);
        assertThat(admission.waiting()).isZero();
        assertThat(admission.waitedCount()).isEqualTo(1);
        a.release();
        c.release();
        assertThat(admission.admittedBytes()).isZero();
        assertThat(admission.running()).isZero();
        assertThat(admission.admittedCount()).isEqualTo(3);
    }

    @Test
    void aLaterSmallRequestNeverPassesAWaitingLargerOne() {
        MemoryAdmission.Ticket running = acquire(70);
        MemoryAdmission.Ticket large = acquire(50);
        MemoryAdmission.Ticket small = acquire(10);   // would fit beside the 70, but the 50 came first

        assertThat(order).containsExactly(70L);
        running.release();
        assertThat(order).containsExactly(70L, 50L, 10L);
        large.release();
        small.release();
    }

    @Test
    void aRequestLargerThanTheCapLessResidentMemoryIsRefusedAtOnceNamingTheBytes() {
        inUse.set(30);                                 // sampled while nothing runs: resident
        assertThatThrownBy(() -> acquire(71))
                .isInstanceOf(OutOfDeviceMemoryException.class)
                .hasMessageContaining("needs 71 bytes")
                .hasMessageContaining("70 bytes the pool on host:0 can ever give")
                .hasMessageContaining("cap of 100 bytes less 30 bytes resident");
        assertThat(admission.refusedCount()).isEqualTo(1);
        assertThat(admission.waiting()).isZero();
        assertThat(order).isEmpty();
        acquire(70).release();
        assertThat(order).containsExactly(70L);
    }

    @Test
    void aCancelledWaiterLeavesTheQueueAndTheOnesItBlockedGoAhead() {
        MemoryAdmission.Ticket running = acquire(60);
        MemoryAdmission.Ticket large = acquire(50);
        MemoryAdmission.Ticket small = acquire(30);

        assertThat(large.cancel()).isTrue();
        assertThat(order).containsExactly(60L, 30L);
        assertThat(admission.abandonedCount()).isEqualTo(1);
        assertThat(admission.waiting()).isZero();
        assertThat(admission.waitingBytes()).isZero();
        large.release();                               // a cancelled ticket holds nothing to give back
        assertThat(admission.admittedBytes()).isEqualTo(90);
        assertThat(small.cancel()).isFalse();          // admitted already: its owner releases it
        running.release();
        small.release();
        small.release();                               // idempotent
        assertThat(admission.admittedBytes()).isZero();
        assertThat(order).containsExactly(60L, 30L);
    }

    @Test
    void whenNothingRunsTheHeadIsAdmittedEvenIfTheCapFellBelowItsCharge() {
        MemoryAdmission.Ticket running = acquire(60);
        MemoryAdmission.Ticket waiter = acquire(90);
        cap.set(80);                                   // tuned lower while the 90 waits

        running.release();
        assertThat(order).containsExactly(60L, 90L);   // alone, the pool's recovery decides
        waiter.release();
    }

    @Test
    void residentMemoryIsSampledWhenNothingIsAdmittedAndLowersTheCeiling() {
        inUse.set(20);
        MemoryAdmission.Ticket a = acquire(50);
        assertThat(admission.residentBytes()).isEqualTo(20);
        assertThat(admission.ceilingBytes()).isEqualTo(80);
        MemoryAdmission.Ticket b = acquire(40);        // 50 + 40 > 80: waits
        assertThat(order).containsExactly(50L);
        assertThat(admission.availableBytes()).isEqualTo(30);

        inUse.set(10);                                 // a workspace went back meanwhile
        a.release();                                   // nothing admitted: resample before admitting b
        assertThat(admission.residentBytes()).isEqualTo(10);
        assertThat(order).containsExactly(50L, 40L);
        assertThat(admission.availableBytes()).isEqualTo(50);
        b.release();
    }

    @Test
    void aRequestRunningAgainAloneGoesFirstWaitsForEverythingRunningAndKeepsOthersOut() {
        MemoryAdmission.Ticket a = acquire(30);
        MemoryAdmission.Ticket b = acquire(20);
        MemoryAdmission.Ticket waiter = acquire(60);                  // 50 + 60 > 100: waits
        MemoryAdmission.Ticket again = admission.acquireAlone(20, ticket -> order.add(-ticket.charge()));

        assertThat(admission.aloneCount()).isEqualTo(1);
        assertThat(admission.waiting()).isEqualTo(2);
        a.release();
        assertThat(order).containsExactly(30L, 20L);                  // b still runs
        b.release();
        assertThat(order).containsExactly(30L, 20L, -20L);            // alone, ahead of the 60
        MemoryAdmission.Ticket small = acquire(1);                     // fits, but nobody joins a request alone
        assertThat(order).containsExactly(30L, 20L, -20L);
        again.release();
        assertThat(order).containsExactly(30L, 20L, -20L, 60L, 1L);
        waiter.release();
        small.release();
        assertThat(admission.admittedBytes()).isZero();
    }

    @Test
    void requestsSentBackToRunAloneRunOneAtATimeInTheOrderTheyWereSentBackAheadOfEveryWaiter() {
        MemoryAdmission.Ticket running = acquire(30);
        MemoryAdmission.Ticket waiter = acquire(80);                  // 30 + 80 > 100: waits
        MemoryAdmission.Ticket first = admission.acquireAlone(10, ticket -> order.add(-ticket.charge()));
        MemoryAdmission.Ticket second = admission.acquireAlone(20, ticket -> order.add(-ticket.charge()));

        assertThat(admission.waiting()).isEqualTo(3);
        assertThat(admission.waitingBytes()).isEqualTo(110);
        running.release();
        assertThat(order).containsExactly(30L, -10L);
        first.release();
        assertThat(order).containsExactly(30L, -10L, -20L);
        second.release();
        assertThat(order).containsExactly(30L, -10L, -20L, 80L);
        waiter.release();
        assertThat(admission.waiting()).isZero();
        assertThat(admission.admittedBytes()).isZero();
    }

    @Test
    void aCancelledRequestSentBackToRunAloneLeavesTheQueueAndTheNextOneRuns() {
        MemoryAdmission.Ticket running = acquire(30);
        MemoryAdmission.Ticket first = admission.acquireAlone(10, ticket -> order.add(-ticket.charge()));
        MemoryAdmission.Ticket second = admission.acquireAlone(20, ticket -> order.add(-ticket.charge()));

        assertThat(first.cancel()).isTrue();
        assertThat(admission.waiting()).isEqualTo(1);
        assertThat(admission.waitingBytes()).isEqualTo(20);
        running.release();
        assertThat(order).containsExactly(30L, -20L);
        second.release();
        assertThat(admission.admittedBytes()).isZero();
    }

    @Test
    void anOutOfMemoryBelowTheCeilingLowersTheLimitWhichClimbsBackAsRequestsSucceed() {
        MemoryAdmission.Ticket a = acquire(40);
        MemoryAdmission.Ticket b = acquire(40);
        a.outOfMemory();                                          // the pool could not hold 80 of charges
        assertThat(admission.limitBytes()).isEqualTo(60);         // 3/4 of what was admitted
        assertThat(admission.ceilingBytes()).isEqualTo(100);
        a.release();                                              // ran out of memory: no increase
        assertThat(admission.limitBytes()).isEqualTo(60);

        MemoryAdmission.Ticket c = acquire(30);                   // 40 + 30 fits the ceiling, not the limit
        assertThat(order).containsExactly(40L, 40L);
        b.release();                                              // ended well: +100/32
        assertThat(order).containsExactly(40L, 40L, 30L);
        assertThat(admission.limitBytes()).isEqualTo(63);
        c.release();
        for (int i = 0; i < 12; i++) {
            acquire(10).release();
        }
        assertThat(admission.limitBytes()).isEqualTo(100);        // back at the ceiling
        assertThatThrownBy(() -> acquire(101)).isInstanceOf(OutOfDeviceMemoryException.class);
        acquire(90).release();                                    // refusals compare with the ceiling only
    }

    @Test
    void aResidentFloorHoldsBackWhatAnIdleSampleMissed() {
        AtomicLong floor = new AtomicLong(30);             // workspaces given up while idle come back with work
        MemoryAdmission floored = new MemoryAdmission("host:0", true, cap::get, inUse::get, b -> b, floor::get);
        inUse.set(10);
        MemoryAdmission.Ticket a = floored.acquire(70, ticket -> order.add(ticket.charge()));
        assertThat(floored.residentBytes()).isEqualTo(30);
        assertThat(floored.ceilingBytes()).isEqualTo(70);
        assertThatThrownBy(() -> floored.acquire(71, ticket -> { }))
                .hasMessageContaining("cap of 100 bytes less 30 bytes resident");
        a.release();
        inUse.set(50);                                     // a sample above the floor wins
        floored.acquire(10, ticket -> { }).release();
        assertThat(floored.residentBytes()).isEqualTo(50);
    }

    @Test
    void switchedOffEveryRequestIsAdmittedAtOnce() {
        MemoryAdmission off = new MemoryAdmission("host:0", false, cap::get, inUse::get, b -> b);
        List<MemoryAdmission.Ticket> tickets = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            tickets.add(off.acquire(80, ticket -> order.add(ticket.charge())));
        }
        tickets.add(off.acquire(500, ticket -> order.add(ticket.charge())));
        assertThat(order).containsExactly(80L, 80L, 80L, 500L);
        assertThat(off.waiting()).isZero();
        assertThat(off.refusedCount()).isZero();
        tickets.forEach(MemoryAdmission.Ticket::release);
        assertThat(off.admittedBytes()).isZero();
    }

    @Test
    void aTicketMadeBeforeItEntersIsTheOneItsOwnerHoldsWhenItsCallbackRunsAtOnceOrLater() {
        List<MemoryAdmission.Ticket> seen = new ArrayList<>();
        MemoryAdmission.Ticket running = admission.ticket(80, seen::add);
        running.enter();                                         // admitted at once: the callback ran inside enter
        assertThat(seen).containsExactly(running);
        MemoryAdmission.Ticket waiting = admission.ticket(40, seen::add);
        waiting.enter();                                         // 80 + 40 > 100: waits
        assertThat(seen).containsExactly(running);
        running.release();
        assertThat(seen).containsExactly(running, waiting);
        MemoryAdmission.Ticket alone = admission.aloneTicket(40, seen::add);
        alone.enter();                                           // something runs: an alone ticket waits for it
        assertThat(admission.waiting()).isEqualTo(1);
        waiting.release();
        assertThat(seen).containsExactly(running, waiting, alone);
        alone.release();
        assertThat(admission.running()).isZero();
        assertThat(admission.admittedBytes()).isZero();
    }

    @Test
    void aTicketEntersOnceAndARefusedOneHoldsNothing() {
        MemoryAdmission.Ticket ticket = admission.ticket(10, t -> { });
        ticket.enter();
        assertThatThrownBy(ticket::enter).isInstanceOf(IllegalStateException.class).hasMessageContaining("once");
        ticket.release();
        MemoryAdmission.Ticket tooLarge = admission.ticket(101, t -> { });
        assertThatThrownBy(tooLarge::enter).isInstanceOf(OutOfDeviceMemoryException.class);
        tooLarge.release();                                      // a no-op: it was never admitted
        assertThat(tooLarge.cancel()).isFalse();
        assertThat(admission.admittedBytes()).isZero();
        assertThat(admission.waiting()).isZero();
        assertThat(admission.refusedCount()).isEqualTo(1);
    }
}
