package io.backplane.core.config;

import io.backplane.spi.BackplaneException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Keeps the values an error quotes short: a 1 MB string in a config is named by its first
 * characters and its length, never copied whole into the error a client reads and the log repeats.
 * The config parser applies it to its errors, the model registry to every load error.
 */
public final class ErrorText {
    /** The most characters of one quoted value an error keeps. */
    static final int QUOTED_CHARS = 512;
    /** The most characters of an error message. */
    static final int MESSAGE_CHARS = 4_000;

    private static final Pattern QUOTED = Pattern.compile("'[^'\\n]{" + (QUOTED_CHARS + 1) + ",}'|\"[^\"\\n]{" + (QUOTED_CHARS + 1) + ",}\"");

    private ErrorText() {
    }

    /** {@code text} itself when it has at most {@code max} characters, else its start and how many were left out. */
    public static String abbreviate(String text, int max) {
        if (text.length() <= max) {
            return text;
        }
        return text.substring(0, max) + "... (" + (text.length() - max) + " more characters)";
    }

    /** {@code message} with every quoted value longer than {@link #QUOTED_CHARS} cut short, and at most {@link #MESSAGE_CHARS} long. */
    public static String bounded(String message) {
        if (message.length() <= QUOTED_CHARS) {
            return message;
        }
        Matcher m = QUOTED.matcher(message);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String q = m.group();
            char mark = q.charAt(0);
            m.appendReplacement(out, Matcher.quoteReplacement(mark + abbreviate(q.substring(1, q.length() - 1), QUOTED_CHARS) + mark));
        }
        m.appendTail(out);
        return abbreviate(out.toString(), MESSAGE_CHARS);
    }

    /** {@code e} itself when its message is already short, else the same error with a {@link #bounded} message and log detail. */
    public static BackplaneException bounded(BackplaneException e) {
        String message = bounded(e.getMessage());
        String detail = e.logDetail() == null ? null : abbreviate(e.logDetail(), MESSAGE_CHARS);
        if (message.equals(e.getMessage()) && java.util.Objects.equals(detail, e.logDetail())) {
            return e;
        }
        BackplaneException b = new BackplaneException(e.code(), message, detail, e.getCause());
        b.setStackTrace(e.getStackTrace());
        return b;
    }
}
