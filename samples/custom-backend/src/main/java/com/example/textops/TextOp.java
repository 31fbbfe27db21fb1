package com.example.textops;

import com.google.common.base.Ascii;
import io.backplane.spi.BackplaneException;
import java.util.Locale;

/** What a textops model does to each string ({@code parameters { key: "op" ... }}). */
enum TextOp {
    UPPER,
    LOWER,
    REVERSE;

    String apply(String s) {
        return switch (this) {
            case UPPER -> Ascii.toUpperCase(s);
            case LOWER -> Ascii.toLowerCase(s);
            case REVERSE -> new StringBuilder(s).reverse().toString();
        };
    }

    static TextOp parse(String value, String model) {
        try {
            return valueOf(value.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw BackplaneException.invalid("model '" + model + "': parameter op is '" + value + "'; use upper, lower or reverse");
        }
    }
}
