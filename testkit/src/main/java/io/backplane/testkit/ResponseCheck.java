package io.backplane.testkit;

import io.backplane.spi.InferenceRequest;
import io.backplane.spi.InferenceResponse;
import java.util.List;

/**
 * Checks that the responses a request got are right for <em>that</em> request. Requests made
 * by {@link ConformanceModel#request} carry distinct payloads per tag, so a check that compares
 * outputs with inputs also catches responses routed to the wrong request.
 */
@FunctionalInterface
public interface ResponseCheck {
    /**
     * @param request the request as the kit sent it (its id is {@code kit-<tag>})
     * @param responses every successful response it got, in order: exactly one for a plain model,
     *     zero or more for a decoupled one
     * @throws Exception (typically an {@link AssertionError}) saying what is wrong; the kit
     *     reports it as an L1 failure naming the request
     */
    void check(InferenceRequest request, List<InferenceResponse> responses) throws Exception;
}
