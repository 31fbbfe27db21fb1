// Maven's archetype generator does not keep file modes: make the wrapper executable again.
def mvnw = new File(request.outputDirectory, request.artifactId + "/mvnw")
if (mvnw.exists()) {
    mvnw.setExecutable(true, false)
}
