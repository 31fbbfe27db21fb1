package io.backplane.plugin.grpc;

import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gRPC server's listening channel, capped at {@code max_connections} (O2): a connection accepted
 * over the cap is closed at once, before gRPC sees it, so a flood of connections cannot take the
 * descriptors the stubs and the other frontends need. The count drops when a connection closes.
 * gRPC offers no such limit itself; this is its Netty server channel with the accept step guarded.
 */
final class CappedServerChannel extends NioServerSocketChannel {
    private static final Logger log = LoggerFactory.getLogger(CappedServerChannel.class);

    private final AtomicInteger open;
    private final int max;

    CappedServerChannel(AtomicInteger open, int max) {
        this.open = open;
        this.max = max;
    }

    @Override
    protected int doReadMessages(List<Object> buf) throws Exception {
        int from = buf.size();
        int n = super.doReadMessages(buf);
        for (int i = buf.size() - 1; i >= from; i--) {
            if (!(buf.get(i) instanceof Channel child)) {
                continue;
            }
            if (open.incrementAndGet() > max) {
                open.decrementAndGet();
                buf.remove(i);
                n--;
                log.debug("grpc connection from {} refused: {} connections open (option max_connections)", child.remoteAddress(), max);
                child.unsafe().closeForcibly();
            } else {
                child.closeFuture().addListener(f -> open.decrementAndGet());
            }
        }
        return n;
    }
}
