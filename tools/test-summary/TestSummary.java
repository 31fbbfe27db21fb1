import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;

/**
 * Prints one line per module with the tests this build ran (its surefire and failsafe reports
 * written since the build started) and a grand total. Run by the last reactor module, so that
 * {@code ./mvnw -B verify}, quiet or not, ends with the figures.
 *
 * <pre>java TestSummary.java ROOT --since=START_EPOCH_MILLIS</pre>
 */
public final class TestSummary {
    private record Counts(int run, int failed, int errors, int skipped, double seconds) {
        Counts plus(Counts o) {
            return new Counts(run + o.run, failed + o.failed, errors + o.errors, skipped + o.skipped, seconds + o.seconds);
        }

        String line(String name) {
            return String.format(Locale.ROOT, "%-42s %5d run, %3d failed, %3d errors, %3d skipped  (%.1f s)%s", name, run, failed, errors, skipped, seconds,
                    failed + errors > 0 ? "  <<< FAILURES" : "");
        }
    }

    public static void main(String[] args) throws Exception {
        Path root = Path.of(args[0]).toAbsolutePath().normalize();
        long since = args.length > 1 ? Long.parseLong(args[1].replace("--since=", "")) : 0L;
        Map<String, Counts> byModule = new TreeMap<>();
        List<Path> reports = new ArrayList<>();
        try (Stream<Path> s = Files.walk(root, 8)) {
            s.filter(p -> p.getFileName().toString().startsWith("TEST-") && p.getFileName().toString().endsWith(".xml"))
                    .filter(p -> p.getParent() != null && (p.getParent().endsWith("surefire-reports") || p.getParent().endsWith("failsafe-reports")))
                    .filter(p -> !p.toString().contains("/archetype-resources/"))
                    .forEach(reports::add);
        }
        var factory = DocumentBuilderFactory.newInstance();
        for (Path report : reports) {
            if (Files.getLastModifiedTime(report).toMillis() < since) {
                continue; // an earlier build's report: this build did not run that module's tests
            }
            Path module = report.getParent().getParent().getParent(); // <module>/target/<x>-reports/TEST-*.xml
            String name = root.relativize(module).toString();
            Element suite;
            try (InputStream in = Files.newInputStream(report)) {
                suite = factory.newDocumentBuilder().parse(in).getDocumentElement();
            } catch (IOException | org.xml.sax.SAXException e) {
                System.out.println("Tests  " + name + ": unreadable report " + report.getFileName() + " (" + e.getMessage() + ")");
                continue;
            }
            Counts c = new Counts(num(suite, "tests"), num(suite, "failures"), num(suite, "errors"), num(suite, "skipped"), dbl(suite, "time"));
            byModule.merge(name.isEmpty() ? "." : name, c, Counts::plus);
        }
        Counts total = new Counts(0, 0, 0, 0, 0);
        System.out.println();
        System.out.println("Tests of this build, by module:");
        for (Map.Entry<String, Counts> e : byModule.entrySet()) {
            System.out.println("  " + e.getValue().line(e.getKey()));
            total = total.plus(e.getValue());
        }
        System.out.println("  " + total.line("TOTAL (" + byModule.size() + " modules)"));
        System.out.println();
    }

    private static int num(Element e, String attribute) {
        String v = e.getAttribute(attribute);
        return v.isEmpty() ? 0 : Integer.parseInt(v.strip());
    }

    private static double dbl(Element e, String attribute) {
        String v = e.getAttribute(attribute).replace(",", "");
        return v.isEmpty() ? 0 : Double.parseDouble(v.strip());
    }
}
